"""The unsubscribeToken leaves the service only in the mail to its subscriber: never in an API
response (public or operator, success or error), the admin, the OpenAPI document, the metrics page
or the logs. Neither does the hash stored in its place."""

from __future__ import annotations

import hashlib
import time

import pytest

from apps.outreach.models import Subscriber
from tests.outreach.conftest import CONFIRM, INQUIRIES, STATISTICS, SUBMIT, SUBSCRIBE, SUBSCRIBERS, UNSUBSCRIBE, token_of, valid_inquiry

pytestmark = pytest.mark.django_db(databases="__all__")


def test_the_token_never_leaves_except_by_mail(  # noqa: PLR0917 (fixtures)
    client, admin_client, operator, subscribe, mailbox, settings, log_lines, django_capture_on_commit_callbacks
):
    settings.OUTREACH_METRICS_ENABLED = True
    outputs = []

    def record(response):
        assert response.status_code < 500, response.content
        outputs.append("\n".join([response.content.decode(errors="replace"), *(f"{k}: {v}" for k, v in response.items())]))
        return response

    with django_capture_on_commit_callbacks(using="outreach", execute=True):
        created = record(operator.post(SUBSCRIBERS, {"email": "added@example.com"}, format="json"))
    added_token = token_of(mailbox.wait_to("added@example.com")[0])
    token = subscribe("reader@example.com")
    reader = Subscriber.objects.get(email="reader@example.com")
    secrets = {
        token,
        added_token,
        hashlib.sha256(token.encode()).hexdigest(),
        reader.token_hash,
        Subscriber.objects.get(email="added@example.com").token_hash,
    }

    # Public endpoints, including their error answers and the one-click form.
    record(client.post(SUBMIT, valid_inquiry(), content_type="application/json"))
    record(client.post(SUBSCRIBE, {"email": "reader@example.com"}, content_type="application/json"))
    record(client.post(CONFIRM, {"token": token}, content_type="application/json"))
    record(client.post(CONFIRM, {"token": token, "extra": token}, content_type="application/json"))
    record(client.post(CONFIRM, {"token": token + "!"}, content_type="application/json"))
    record(client.post(UNSUBSCRIBE, {"token": token[::-1]}, content_type="application/json"))
    record(client.post(f"{UNSUBSCRIBE}?token={token}", {"token": added_token}, content_type="application/json"))
    record(
        client.post(f"{UNSUBSCRIBE}?token={added_token}", "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded")
    )
    record(client.post(UNSUBSCRIBE, {"token": token}, content_type="application/json"))
    record(client.post(f"{UNSUBSCRIBE}?token={token}", "x" * (20 * 1024), content_type="application/json"))
    record(client.options(UNSUBSCRIBE))

    # Operator endpoints.
    subscriber_id = created.json()["id"]
    record(operator.get(SUBSCRIBERS))
    record(operator.get(SUBSCRIBERS, {"email": "reader@example.com"}))
    record(operator.get(f"{SUBSCRIBERS}/{reader.id}"))
    record(operator.patch(f"{SUBSCRIBERS}/{reader.id}", {"name": "Reader"}, format="json"))
    record(operator.patch(f"{SUBSCRIBERS}/{reader.id}", {"token": token}, format="json"))
    record(operator.post(SUBSCRIBERS, {"email": "reader@example.com"}, format="json"))
    record(operator.options(SUBSCRIBERS))
    record(operator.get(INQUIRIES))
    record(operator.get(STATISTICS))
    record(operator.delete(f"{SUBSCRIBERS}/{subscriber_id}"))

    # Documents, probes, metrics and the admin.
    for url in ["/v1/api/outreach/doc/openapi.json", "/v1/api/outreach/doc", "/v1/api/outreach/healthz", "/metrics"]:
        record(client.get(url))
    record(admin_client.get("/admin/outreach/subscriber/"))
    record(admin_client.get(f"/admin/outreach/subscriber/{reader.id}/change/"))
    record(admin_client.get("/admin/outreach/subscriber/", {"q": "reader"}))

    assert all(output for output in outputs)
    assert "reader@example.com" in "".join(outputs)  # the capture does see subscriber data
    deadline = time.monotonic() + 5  # the sender thread logs once the SMTP server has answered
    while sum("outreach.mail.sent" in line for line in log_lines.lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    lines = log_lines.lines
    assert sum("outreach.mail.sent" in line for line in lines) == 2  # the mail threads' lines are checked too
    assert any("path='/v1/api/outreach/subscribers/unsubscribe'" in line for line in lines)  # and the request lines
    for secret in secrets:
        leaks = [output[:200] for output in outputs if secret in output]
        assert not leaks, leaks
        assert not [line for line in lines if secret in line]
