"""The Django admin (all-in-one topology): notifications read-only, deletes through the service
(soft); and the browser client's static files are served."""

from __future__ import annotations

import pytest

from apps.signal.models import Notification
from tests.signal.conftest import notify
from tests.support.auth import random_user_id

pytestmark = pytest.mark.django_db(databases="__all__")


def test_notifications_are_listed_and_shown_read_only(admin_client):
    row = notify(random_user_id(), title="Paid")

    assert admin_client.get("/admin/signal/notification/").status_code == 200
    page = admin_client.get(f"/admin/signal/notification/{row.id}/change/")
    assert page.status_code == 200 and b"Paid" in page.content
    assert b'name="title"' not in page.content
    assert admin_client.get("/admin/signal/notification/add/").status_code == 403


def test_the_admin_delete_is_the_service_s_soft_delete(admin_client):
    rows = [notify(random_user_id()), notify(random_user_id())]

    response = admin_client.post(
        "/admin/signal/notification/", {"action": "delete_selected", "_selected_action": [r.id for r in rows], "post": "yes"}
    )

    assert response.status_code == 302
    assert not Notification.objects.filter(id__in=[r.id for r in rows]).exists()
    assert Notification.all_objects.filter(id__in=[r.id for r in rows], deleted_at__isnull=False).count() == 2


@pytest.mark.parametrize("path", ["/static/signal/stream-client.js", "/static/signal/demo.html"])
def test_the_browser_client_and_its_demo_page_are_served(client, path):
    response = client.get(path)

    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert b"SignalStream" in body
