"""The Django admin (all-in-one topology): read-only records, changes through the services' actions."""

from __future__ import annotations

import pytest

from apps.outreach import services
from apps.outreach.models import Inquiry, Subscriber

pytestmark = pytest.mark.django_db(databases="__all__")


def inquiry() -> Inquiry:
    return services.inquiry_submit(name="Ada", email="ada@example.com", subject="Prices", message="Hello")


def test_records_are_listed_and_shown_read_only(admin_client):
    row = inquiry()

    assert admin_client.get("/admin/outreach/inquiry/").status_code == 200
    page = admin_client.get(f"/admin/outreach/inquiry/{row.id}/change/")
    assert page.status_code == 200 and b"ada@example.com" in page.content
    assert b'name="subject"' not in page.content  # no editable field
    assert admin_client.get("/admin/outreach/inquiry/add/").status_code == 403


def test_the_spam_action_goes_through_the_service(admin_client):
    row = inquiry()

    response = admin_client.post("/admin/outreach/inquiry/", {"action": "mark_spam", "_selected_action": [row.id]})

    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == Inquiry.Status.CANCELLED


def test_the_unsubscribe_action_and_soft_delete(admin_client):
    subscriber = Subscriber.objects.create(email="reader@example.com", status=Subscriber.Status.ACTIVE, token_hash=services.new_token()[1])

    admin_client.post("/admin/outreach/subscriber/", {"action": "unsubscribe", "_selected_action": [subscriber.id]})
    subscriber.refresh_from_db()
    assert subscriber.status == Subscriber.Status.UNSUBSCRIBED

    admin_client.post("/admin/outreach/subscriber/", {"action": "delete_selected", "_selected_action": [subscriber.id], "post": "yes"})
    assert not Subscriber.objects.exists()
    assert Subscriber.all_objects.get(pk=subscriber.pk).deleted_at is not None
