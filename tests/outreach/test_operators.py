"""Operator CRUD of inquiries and subscribers: JWT, the policy layer, filters, ordering, pagination,
soft delete and the spam transition."""

from __future__ import annotations

import pytest

from apps.outreach import services
from apps.outreach.models import Inquiry, Subscriber
from apps.outreach.seeds import run as seed
from tests.outreach.conftest import INQUIRIES, SUBSCRIBERS

pytestmark = pytest.mark.django_db(databases="__all__")


def make_inquiry(**overrides) -> Inquiry:
    fields = {"name": "Ada", "email": "ada@example.com", "subject": "Prices", "message": "Hello", **overrides}
    return services.inquiry_submit(**fields)


def make_subscriber(email: str, **fields) -> Subscriber:
    _, token_hash = services.new_token()
    return Subscriber.objects.create(email=email, status=fields.pop("status", Subscriber.Status.ACTIVE), token_hash=token_hash, **fields)


def ids(response) -> list[str]:
    return [row["id"] for row in response.json()["results"]]


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", INQUIRIES),
        ("get", f"{INQUIRIES}/1"),
        ("patch", f"{INQUIRIES}/1"),
        ("delete", f"{INQUIRIES}/1"),
        ("get", SUBSCRIBERS),
        ("post", SUBSCRIBERS),
        ("get", f"{SUBSCRIBERS}/1"),
        ("patch", f"{SUBSCRIBERS}/1"),
        ("delete", f"{SUBSCRIBERS}/1"),
        ("get", "/v1/api/outreach/statistics"),
    ],
)
def test_operator_routes_need_a_token(client, method, url):
    response = getattr(client, method)(url)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_forged_token_is_refused(client):
    response = client.get(INQUIRIES, HTTP_AUTHORIZATION="Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.")

    assert response.status_code == 401


def test_list_inquiries_with_filters_ordering_and_pagination(operator):
    first = make_inquiry(merchant_id=11)
    second = make_inquiry(email="bob@example.com")
    third = make_inquiry(merchant_id=11)
    services.inquiry_update(inquiry_id=third.id, status=Inquiry.Status.CANCELLED)

    assert ids(operator.get(INQUIRIES)) == [str(third.id), str(second.id), str(first.id)]
    assert ids(operator.get(INQUIRIES, {"ordering": "createdAt"})) == [str(first.id), str(second.id), str(third.id)]
    assert ids(operator.get(INQUIRIES, {"status": "SENT"})) == [str(second.id), str(first.id)]
    assert ids(operator.get(INQUIRIES, {"merchantId": "11", "status": "CANCELLED"})) == [str(third.id)]
    assert ids(operator.get(INQUIRIES, {"email": "BOB@example.com"})) == [str(second.id)]
    page = operator.get(INQUIRIES, {"pageSize": 2, "page": 2}).json()
    assert page["count"] == 3 and [row["id"] for row in page["results"]] == [str(first.id)]


@pytest.mark.parametrize(
    "query",
    [
        {"status": "SPAM"},
        {"merchantId": "x"},
        {"merchantId": str(2**63)},
        {"createdAfter": "yesterday"},
        {"createdAfter": "2025-01-01T00:00:00+16:00"},
        {"createdBefore": "2025-01-01T00:00:00-23:59"},
        {"ordering": "message"},
        {"pageSize": "0"},
        {"pageSize": "x"},
        {"page": "0"},
    ],
)
def test_bad_list_filters_are_a_validation_problem(operator, query):
    response = operator.get(INQUIRIES, query)

    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_ERROR"


def test_retrieve_an_inquiry(operator):
    inquiry = make_inquiry(phone="+442079460958", merchant_id=5)

    body = operator.get(f"{INQUIRIES}/{inquiry.id}").json()

    assert body == {
        "id": str(inquiry.id),
        "name": "Ada",
        "email": "ada@example.com",
        "phone": "+442079460958",
        "subject": "Prices",
        "message": "Hello",
        "merchantId": "5",
        "status": "SENT",
        "createdAt": body["createdAt"],
        "updatedAt": body["updatedAt"],
    }


def test_marking_spam_cancels_the_inquiry_and_cannot_be_undone(operator):
    inquiry = make_inquiry()

    response = operator.patch(f"{INQUIRIES}/{inquiry.id}", {"status": "CANCELLED"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "CANCELLED"
    inquiry.refresh_from_db()
    assert inquiry.status == Inquiry.Status.CANCELLED

    assert operator.patch(f"{INQUIRIES}/{inquiry.id}", {"status": "CANCELLED"}, format="json").status_code == 200  # idempotent
    undo = operator.patch(f"{INQUIRIES}/{inquiry.id}", {"status": "SENT"}, format="json")
    assert undo.status_code == 409 and undo.json()["code"] == "INQUIRY_TRANSITION_NOT_ALLOWED"


@pytest.mark.parametrize("body", [{}, {"status": "SPAM"}, {"message": "edited"}, {"status": "CANCELLED", "subject": "edited"}])
def test_an_inquiry_update_accepts_only_a_status(operator, body):
    inquiry = make_inquiry()

    response = operator.patch(f"{INQUIRIES}/{inquiry.id}", body, format="json")

    assert response.status_code == 400
    inquiry.refresh_from_db()
    assert (inquiry.status, inquiry.message, inquiry.subject) == (Inquiry.Status.SENT, "Hello", "Prices")


def test_put_is_not_offered(operator):
    inquiry = make_inquiry()

    assert operator.put(f"{INQUIRIES}/{inquiry.id}", {"status": "CANCELLED"}, format="json").status_code == 405


def test_deleting_an_inquiry_is_soft(operator):
    inquiry = make_inquiry()

    assert operator.delete(f"{INQUIRIES}/{inquiry.id}").status_code == 204

    assert operator.get(f"{INQUIRIES}/{inquiry.id}").status_code == 404
    assert ids(operator.get(INQUIRIES)) == []
    assert Inquiry.all_objects.get(pk=inquiry.pk).deleted_at is not None
    assert operator.delete(f"{INQUIRIES}/{inquiry.id}").status_code == 404


def test_unknown_and_non_numeric_ids_are_404(operator):
    assert operator.get(f"{INQUIRIES}/999").status_code == 404
    assert operator.get(f"{INQUIRIES}/abc").status_code == 404


def test_merchant_staff_see_only_their_merchants_inquiries(make_caller):
    seed()
    ours, theirs, platform = make_inquiry(merchant_id=101), make_inquiry(merchant_id=202), make_inquiry()
    owner = make_caller(roles=[("OWNER", 101)]).client()
    employee = make_caller(roles=[("EMPLOYEE", 101)]).client()
    cashier = make_caller(roles=[("CASHIER", 101)]).client()

    assert ids(owner.get(INQUIRIES)) == [str(ours.id)]
    assert ids(employee.get(INQUIRIES)) == [str(ours.id)]
    assert ids(cashier.get(INQUIRIES)) == []
    # Another tenant's record, or a platform one, does not exist for them.
    assert owner.get(f"{INQUIRIES}/{theirs.id}").status_code == 404
    assert owner.patch(f"{INQUIRIES}/{platform.id}", {"status": "CANCELLED"}, format="json").status_code == 404
    # The owner may mark spam; the employee may only read.
    assert owner.patch(f"{INQUIRIES}/{ours.id}", {"status": "CANCELLED"}, format="json").status_code == 200
    assert employee.delete(f"{INQUIRIES}/{ours.id}").status_code == 403
    assert Inquiry.objects.filter(pk=ours.pk).exists()


def test_subscribers_are_for_platform_wide_grants_only(make_caller):
    seed()
    make_subscriber("reader@example.com")
    owner = make_caller(roles=[("OWNER", 101)]).client()

    assert owner.get(SUBSCRIBERS).json()["results"] == []
    assert owner.post(SUBSCRIBERS, {"email": "new@example.com"}, format="json").status_code == 403


def test_seeds_are_idempotent():
    first = seed()
    again = seed()

    assert first["removed"] == 0
    assert again == {"created": 0, "removed": 0}


def test_list_and_filter_subscribers(operator):
    active = make_subscriber("a@example.com")
    gone = make_subscriber("b@example.com", status=Subscriber.Status.UNSUBSCRIBED)

    assert set(ids(operator.get(SUBSCRIBERS))) == {str(active.id), str(gone.id)}
    assert ids(operator.get(SUBSCRIBERS, {"status": "UNSUBSCRIBED"})) == [str(gone.id)]
    assert ids(operator.get(SUBSCRIBERS, {"ordering": "email"})) == [str(active.id), str(gone.id)]
    row = operator.get(f"{SUBSCRIBERS}/{active.id}").json()
    assert set(row) == {"id", "email", "name", "status", "confirmedAt", "unsubscribedAt", "createdAt", "updatedAt"}


def test_an_operator_adds_a_subscriber_who_still_confirms(operator, mailbox, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(using="outreach", execute=True):
        response = operator.post(SUBSCRIBERS, {"email": "New@Example.com", "name": "New"}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["status"] == "PENDING" and response.json()["email"] == "new@example.com"
    assert Subscriber.objects.get(email="new@example.com").created_by is not None
    assert mailbox.wait_to("new@example.com")[0]["Subject"] == "Confirm your subscription"

    duplicate = operator.post(SUBSCRIBERS, {"email": "new@example.com"}, format="json")
    assert duplicate.status_code == 409 and duplicate.json()["code"] == "SUBSCRIBER_EXISTS"


@pytest.mark.parametrize(
    "body", [{}, {"email": "bad"}, {"email": "x@example.com", "status": "ACTIVE"}, {"email": "x@example.com", "token": "t"}]
)
def test_operator_create_validates(operator, body):
    response = operator.post(SUBSCRIBERS, body, format="json")

    assert response.status_code == 400
    assert not Subscriber.objects.exists()


def test_an_operator_renames_and_unsubscribes_but_cannot_resubscribe(operator):
    row = make_subscriber("reader@example.com")

    renamed = operator.patch(f"{SUBSCRIBERS}/{row.id}", {"name": "Reader"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Reader"
    gone = operator.patch(f"{SUBSCRIBERS}/{row.id}", {"status": "UNSUBSCRIBED"}, format="json")
    assert gone.status_code == 200 and gone.json()["status"] == "UNSUBSCRIBED" and gone.json()["unsubscribedAt"]
    back = operator.patch(f"{SUBSCRIBERS}/{row.id}", {"status": "ACTIVE"}, format="json")
    assert back.status_code == 409 and back.json()["code"] == "SUBSCRIBER_TRANSITION_NOT_ALLOWED"
    assert operator.patch(f"{SUBSCRIBERS}/{row.id}", {"email": "other@example.com"}, format="json").status_code == 400
    row.refresh_from_db()
    assert (row.email, row.status) == ("reader@example.com", Subscriber.Status.UNSUBSCRIBED)


def test_deleting_a_subscriber_is_soft_and_frees_the_address(operator, client, django_capture_on_commit_callbacks):
    row = make_subscriber("reader@example.com")

    assert operator.delete(f"{SUBSCRIBERS}/{row.id}").status_code == 204

    assert operator.get(f"{SUBSCRIBERS}/{row.id}").status_code == 404
    assert Subscriber.all_objects.get(pk=row.pk).deleted_at is not None
    response = client.post("/v1/api/outreach/subscribers/subscribe", {"email": "reader@example.com"}, content_type="application/json")
    assert response.status_code == 202
    assert Subscriber.all_objects.filter(email="reader@example.com").count() == 2
