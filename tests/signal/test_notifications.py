"""The notifications API (spec 4.8): scoped to the JWT's subject, filters, read marks, soft delete."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.signal.models import Notification
from tests.signal.conftest import NOTIFICATIONS, notify
from tests.support.auth import bearer, mint_token, random_user_id

pytestmark = pytest.mark.django_db(databases="__all__")


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_a_caller_lists_only_its_own_notifications(make_caller):
    caller, other = make_caller(merchants=[5]), make_caller()
    mine = notify(caller.user_id, title="Paid", body="Order 7 was paid.", data={"orderId": "7"}, room="merchant.5")
    notify(other.user_id)

    response = caller.client().get(NOTIFICATIONS)

    assert ids(response) == [str(mine.id)]
    row = response.json()["results"][0]
    assert row == {
        "id": str(mine.id),
        "recipientId": str(caller.user_id),
        "topic": "order.paid",
        "room": "merchant.5",
        "title": "Paid",
        "body": "Order 7 was paid.",
        "data": {"orderId": "7"},
        "readAt": None,
        "createdAt": row["createdAt"],
        "updatedAt": row["updatedAt"],
    }


def test_another_subjects_notification_is_not_found_for_every_route(make_caller):
    caller, other = make_caller(), make_caller()
    theirs = notify(other.user_id)
    client = caller.client()

    assert client.get(f"{NOTIFICATIONS}/{theirs.id}").status_code == 404
    assert client.post(f"{NOTIFICATIONS}/{theirs.id}/read").status_code == 404
    assert client.delete(f"{NOTIFICATIONS}/{theirs.id}").status_code == 404
    assert client.post(f"{NOTIFICATIONS}/read-all").json() == {"marked": 0}
    theirs.refresh_from_db()
    assert theirs.read_at is None and theirs.deleted_at is None


def test_filters_unread_topic_room_and_since(make_caller):
    caller = make_caller(merchants=[9])
    old = notify(caller.user_id, topic="order.paid")
    Notification.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(days=3))
    read = notify(caller.user_id, topic="stock.low", room="merchant.9")
    Notification.objects.filter(id=read.id).update(read_at=timezone.now())
    fresh = notify(caller.user_id, topic="order.paid")
    client = caller.client()

    assert ids(client.get(NOTIFICATIONS)) == [str(fresh.id), str(read.id), str(old.id)]
    assert ids(client.get(NOTIFICATIONS, {"unread": "true"})) == [str(fresh.id), str(old.id)]
    assert ids(client.get(NOTIFICATIONS, {"unread": "false"})) == [str(read.id)]
    assert ids(client.get(NOTIFICATIONS, {"topic": "order.paid"})) == [str(fresh.id), str(old.id)]
    assert ids(client.get(NOTIFICATIONS, {"room": "merchant.9"})) == [str(read.id)]
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert ids(client.get(NOTIFICATIONS, {"since": since})) == [str(fresh.id), str(read.id)]
    assert ids(client.get(NOTIFICATIONS, {"ordering": "createdAt"})) == [str(old.id), str(read.id), str(fresh.id)]


def test_the_room_filter_never_reaches_another_users_notifications_in_that_room(make_caller):
    """The only route naming a room reads the caller's own rows: a stranger filtering by a merchant's
    room sees nothing of what its members were sent there."""
    member, stranger = make_caller(merchants=[13]), make_caller()
    notify(member.user_id, room="merchant.13")

    assert ids(stranger.client().get(NOTIFICATIONS, {"room": "merchant.13"})) == []
    assert len(ids(member.client().get(NOTIFICATIONS, {"room": "merchant.13"}))) == 1


@pytest.mark.parametrize("query", [{"since": "yesterday"}, {"unread": "perhaps"}, {"pageSize": "0"}, {"topic": "x" * 201}])
def test_bad_filters_are_a_400_naming_the_parameter(make_caller, query):
    response = make_caller().client().get(NOTIFICATIONS, query)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert [error["field"] for error in response.json()["errors"]] == list(query)


def test_mark_read_mark_all_read_and_unread_count(make_caller):
    caller = make_caller()
    first, second, third = (notify(caller.user_id) for _ in range(3))
    client = caller.client()
    assert client.get(f"{NOTIFICATIONS}/unread-count").json() == {"unread": 3}

    response = client.post(f"{NOTIFICATIONS}/{first.id}/read")
    assert response.status_code == 200 and response.json()["readAt"] is not None
    read_at = response.json()["readAt"]
    assert client.post(f"{NOTIFICATIONS}/{first.id}/read").json()["readAt"] == read_at  # the first read time stays
    assert client.get(f"{NOTIFICATIONS}/unread-count").json() == {"unread": 2}

    assert client.post(f"{NOTIFICATIONS}/read-all").json() == {"marked": 2}
    assert client.get(f"{NOTIFICATIONS}/unread-count").json() == {"unread": 0}
    assert {n.read_at is not None for n in Notification.objects.filter(id__in=[second.id, third.id])} == {True}


def test_delete_is_soft_and_hides_the_notification(make_caller):
    caller = make_caller()
    notification = notify(caller.user_id)
    client = caller.client()

    assert client.delete(f"{NOTIFICATIONS}/{notification.id}").status_code == 204
    assert client.get(f"{NOTIFICATIONS}/{notification.id}").status_code == 404
    assert ids(client.get(NOTIFICATIONS)) == []
    assert client.get(f"{NOTIFICATIONS}/unread-count").json() == {"unread": 0}
    assert Notification.all_objects.get(id=notification.id).deleted_at is not None


def test_every_route_needs_a_valid_token(client):
    expired = mint_token(random_user_id(), exp=1, iat=0, nbf=0)
    for method, path in (("get", NOTIFICATIONS), ("get", f"{NOTIFICATIONS}/unread-count"), ("post", f"{NOTIFICATIONS}/read-all")):
        assert getattr(client, method)(path).status_code == 401
        response = getattr(client, method)(path, **bearer(expired))
        assert response.status_code == 401 and response.json()["code"] == "TOKEN_EXPIRED"


def test_unknown_body_members_and_methods_are_refused(make_caller):
    caller = make_caller()
    notification = notify(caller.user_id)
    client = caller.client()

    assert client.post(NOTIFICATIONS, {"topic": "x"}, format="json").status_code == 405
    assert client.patch(f"{NOTIFICATIONS}/{notification.id}", {"title": "x"}, format="json").status_code == 405
    assert client.get(f"{NOTIFICATIONS}/not-a-number").status_code == 404
