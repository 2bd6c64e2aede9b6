"""Public subscription: idempotent subscribe, double opt-in, RFC 8058 one-click unsubscribe, and
answers that never reveal whether an address or a token was known."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from apps.outreach import services
from apps.outreach.models import Subscriber
from tests.outreach.conftest import CONFIRM, SUBSCRIBE, UNSUBSCRIBE, subscriber, token_of

pytestmark = pytest.mark.django_db(databases="__all__")


def post_json(client, url, body, **kwargs):
    return client.post(url, json.dumps(body), content_type="application/json", **kwargs)


def test_subscribe_creates_a_pending_subscriber_and_mails_a_confirmation(subscribe, mailbox):
    token = subscribe("Reader@Example.com", name="Reader")

    row = subscriber("reader@example.com")
    assert (row.status, row.name, row.confirmed_at) == (Subscriber.Status.PENDING, "Reader", None)
    # Only a hash of the token is stored.
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in json.dumps(list(Subscriber.objects.values()), default=str)

    message = mailbox.to("reader@example.com")[0]
    assert message["Subject"] == "Confirm your subscription"
    assert message["List-Unsubscribe"].strip() == f"<http://127.0.0.1:8000/v1/api/outreach/subscribers/unsubscribe?token={token}>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert f"/newsletter/confirm?token={token}" in message.get_content()


def test_confirming_activates_and_the_same_token_unsubscribes(client, subscribe):
    token = subscribe("reader@example.com")

    response = post_json(client, CONFIRM, {"token": token})
    assert response.status_code == 200
    row = subscriber("reader@example.com")
    assert row.status == Subscriber.Status.ACTIVE and row.confirmed_at is not None

    response = post_json(client, UNSUBSCRIBE, {"token": token})
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.status == Subscriber.Status.UNSUBSCRIBED and row.unsubscribed_at is not None


def test_the_specs_unsubscribe_token_member_unsubscribes(client, subscribe):
    """The spec names the body member `unsubscribeToken`; a client written from the spec works."""
    token = subscribe("reader@example.com")

    response = post_json(client, UNSUBSCRIBE, {"unsubscribeToken": token})

    assert response.status_code == 200, response.content
    assert subscriber("reader@example.com").status == Subscriber.Status.UNSUBSCRIBED


def test_two_different_tokens_in_one_unsubscribe_are_refused(client, subscribe):
    token = subscribe("reader@example.com")

    response = post_json(client, UNSUBSCRIBE, {"unsubscribeToken": token, "token": "A" * 43})

    assert response.status_code == 400
    assert "unsubscribeToken" in response.content.decode()
    assert subscriber("reader@example.com").status != Subscriber.Status.UNSUBSCRIBED


def test_without_double_opt_in_the_subscriber_is_active_at_once(settings, subscribe, mailbox):
    settings.OUTREACH_DOUBLE_OPT_IN = False

    token = subscribe("reader@example.com")

    assert subscriber("reader@example.com").status == Subscriber.Status.ACTIVE
    message = mailbox.to("reader@example.com")[0]
    assert message["Subject"] == "You are subscribed"
    assert token in message["List-Unsubscribe"]


def test_subscribing_again_creates_no_duplicate_and_answers_the_same(client, subscribe, mailbox, django_capture_on_commit_callbacks):
    token = subscribe("reader@example.com")
    post_json(client, CONFIRM, {"token": token})
    new_address = post_json(client, SUBSCRIBE, {"email": "other@example.com"})

    with django_capture_on_commit_callbacks(using="outreach", execute=True) as callbacks:
        again = post_json(client, SUBSCRIBE, {"email": "READER@example.com", "name": "Someone else"})

    assert (again.status_code, again.json()) == (new_address.status_code, new_address.json()) == (202, again.json())
    assert Subscriber.objects.filter(email="reader@example.com").count() == 1
    row = subscriber("reader@example.com")
    # An active subscription is left alone: same token, same name, no mail.
    assert (row.status, row.name, row.token_hash) == (Subscriber.Status.ACTIVE, "", hashlib.sha256(token.encode()).hexdigest())
    assert callbacks == []


def test_a_pending_address_is_mailed_again_only_after_the_cooldown(client, subscribe, mailbox, django_capture_on_commit_callbacks):
    first = subscribe("reader@example.com")
    with django_capture_on_commit_callbacks(using="outreach", execute=True) as callbacks:
        post_json(client, SUBSCRIBE, {"email": "reader@example.com"})
    assert callbacks == []  # within the cooldown: nothing changes, nothing is sent
    assert subscriber("reader@example.com").token_hash == hashlib.sha256(first.encode()).hexdigest()

    Subscriber.objects.filter(email="reader@example.com").update(last_mailed_at=timezone.now() - timedelta(hours=1))
    second = subscribe("reader@example.com")

    assert second != first
    assert len(mailbox.to("reader@example.com")) == 2
    # The new link works, the old one no longer does.
    post_json(client, CONFIRM, {"token": first})
    assert subscriber("reader@example.com").status == Subscriber.Status.PENDING
    post_json(client, CONFIRM, {"token": second})
    assert subscriber("reader@example.com").status == Subscriber.Status.ACTIVE


def test_an_unsubscribed_address_can_subscribe_again_with_a_new_token(client, subscribe):
    first = subscribe("reader@example.com")
    post_json(client, UNSUBSCRIBE, {"token": first})
    Subscriber.objects.filter(email="reader@example.com").update(last_mailed_at=timezone.now() - timedelta(hours=1))

    second = subscribe("reader@example.com")

    assert second != first
    assert subscriber("reader@example.com").status == Subscriber.Status.PENDING
    assert Subscriber.all_objects.filter(email="reader@example.com").count() == 1


@pytest.mark.parametrize(
    ("content_type", "encode"),
    [
        (
            "application/x-www-form-urlencoded",
            lambda client, url: client.post(url, "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"),
        ),
        ("multipart/form-data", lambda client, url: client.post(url, {"List-Unsubscribe": "One-Click"})),
    ],
)
def test_rfc_8058_one_click_unsubscribe(client, subscribe, content_type, encode):
    """A mail client POSTs `List-Unsubscribe=One-Click` to the List-Unsubscribe URL; the token is in its query."""
    token = subscribe("reader@example.com")

    response = encode(client, f"{UNSUBSCRIBE}?token={token}")

    assert response.status_code == 200, response.content
    assert subscriber("reader@example.com").status == Subscriber.Status.UNSUBSCRIBED


def test_the_list_unsubscribe_header_url_works_as_given(client, subscribe, mailbox):
    subscribe("reader@example.com")
    url = mailbox.to("reader@example.com")[0]["List-Unsubscribe"].strip().strip("<>").removeprefix("http://127.0.0.1:8000")

    response = client.post(url, "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded")

    assert response.status_code == 200
    assert subscriber("reader@example.com").status == Subscriber.Status.UNSUBSCRIBED


def test_an_unknown_token_changes_nothing_and_gets_the_same_answer(client, subscribe):
    token = subscribe("reader@example.com")
    post_json(client, CONFIRM, {"token": token})
    unknown = "A" * 43

    miss = post_json(client, UNSUBSCRIBE, {"token": unknown})
    hit = post_json(client, UNSUBSCRIBE, {"token": token})
    repeat = post_json(client, UNSUBSCRIBE, {"token": token})

    assert miss.status_code == hit.status_code == repeat.status_code == 200
    assert miss.json()["detail"] == hit.json()["detail"] == repeat.json()["detail"]
    assert subscriber("reader@example.com").status == Subscriber.Status.UNSUBSCRIBED
    assert post_json(client, CONFIRM, {"token": unknown}).json() == post_json(client, CONFIRM, {"token": token}).json()


def test_an_unknown_token_leaves_every_subscriber_untouched(client, subscribe):
    token = subscribe("reader@example.com")
    post_json(client, CONFIRM, {"token": token})
    before = list(Subscriber.objects.values())

    post_json(client, UNSUBSCRIBE, {"token": token[:-1] + ("A" if token[-1] != "A" else "B")})

    assert list(Subscriber.objects.values()) == before


def test_a_deleted_subscriber_cannot_be_reached_by_its_token(client, subscribe):
    token = subscribe("reader@example.com")
    subscriber("reader@example.com").delete()

    post_json(client, CONFIRM, {"token": token})

    assert Subscriber.all_objects.get(email="reader@example.com").status == Subscriber.Status.PENDING


@pytest.mark.parametrize(
    ("url", "body"),
    [
        (UNSUBSCRIBE, {}),
        (UNSUBSCRIBE, {"token": "short"}),
        (UNSUBSCRIBE, {"token": "!" * 43}),
        (UNSUBSCRIBE, {"token": 12345}),
        (UNSUBSCRIBE, {"token": "A" * 43, "email": "reader@example.com"}),
        (UNSUBSCRIBE, {"List-Unsubscribe": "Yes-Please", "token": "A" * 43}),
        (f"{UNSUBSCRIBE}?token=bad", {}),
        (f"{UNSUBSCRIBE}?token={'A' * 43}", {"token": "B" * 43}),
        (CONFIRM, {}),
        (CONFIRM, {"token": "A" * 44}),
        (SUBSCRIBE, {}),
        (SUBSCRIBE, {"email": "nope"}),
        (SUBSCRIBE, {"email": "reader@example.com", "name": "n" * 121}),
        (SUBSCRIBE, {"email": "reader@example.com", "status": "ACTIVE"}),
    ],
)
def test_malformed_public_requests_get_a_validation_problem(client, url, body):
    response = post_json(client, url, body)

    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert not Subscriber.all_objects.exists()


@pytest.mark.parametrize("url", [SUBSCRIBE, CONFIRM, UNSUBSCRIBE])
def test_public_subscription_endpoints_refuse_big_bodies_and_get(client, url):
    big = post_json(client, url, {"email": "reader@example.com", "name": "n" * (16 * 1024)})

    assert big.status_code == 413
    assert client.get(url).status_code == 405  # a link scanner's GET never unsubscribes (RFC 8058)


def test_subscription_works_without_smtp_but_says_nothing_else(client, settings, django_capture_on_commit_callbacks):
    settings.EMAIL_URL = ""

    with django_capture_on_commit_callbacks(using="outreach", execute=True):
        response = post_json(client, SUBSCRIBE, {"email": "reader@example.com"})

    assert response.status_code == 202
    assert subscriber("reader@example.com").status == Subscriber.Status.PENDING


def test_a_failing_smtp_server_does_not_fail_the_request(client, settings, django_capture_on_commit_callbacks):
    settings.EMAIL_URL = "smtp://127.0.0.1:1"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 1
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"

    with django_capture_on_commit_callbacks(using="outreach", execute=True):
        response = post_json(client, SUBSCRIBE, {"email": "reader@example.com"})

    assert response.status_code == 202


def test_token_of_reads_one_token_per_message(subscribe, mailbox):
    token = subscribe("reader@example.com")

    assert token_of(mailbox.to("reader@example.com")[0]) == token
    assert len(token) == 43


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_concurrent_subscriptions_of_one_address_create_one_subscriber(settings):
    settings.EMAIL_URL = ""  # no mail needed here
    barrier = threading.Barrier(4)
    errors = []

    def subscribe_once():
        try:
            barrier.wait(timeout=5)
            services.subscriber_subscribe(email="reader@example.com")
        except Exception as exc:  # collected: an exception in a thread would otherwise be lost
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=subscribe_once) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert errors == []
    assert Subscriber.objects.filter(email="reader@example.com").count() == 1
