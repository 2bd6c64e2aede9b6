"""The process's Prometheus page (merchant_platform/metrics.py): off by default, the API responses by
service and status class (the 5xx-rate alert), every consumer group's lag read from the broker (the
consumer-lag alert), and the services' scrape-time gauges."""

from __future__ import annotations

import logging
import socket

import pytest

pytestmark = pytest.mark.django_db(databases="__all__")


def samples(client) -> dict[str, float]:
    page = client.get("/metrics")
    assert page.status_code == 200 and page["Content-Type"].startswith("text/plain")
    values = {}
    for line in page.content.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_off_unless_enabled(client, settings):
    settings.METRICS_ENABLED = False
    settings.OUTREACH_METRICS_ENABLED = False
    assert client.get("/metrics").status_code == 404
    assert client.get("/v1/api/commerce/metrics").status_code == 404  # never under a prefix: the gateway cannot reach it


def test_responses_by_service_and_status_class_and_the_alert_gauges(client, settings):
    settings.METRICS_ENABLED = True
    settings.OUTREACH_METRICS_ENABLED = False
    before = samples(client)
    key_4xx = 'merchant_platform_http_responses_total{service="commerce",status_class="4xx"}'
    key_2xx = 'merchant_platform_http_responses_total{service="commerce",status_class="2xx"}'
    assert client.get("/v1/api/commerce/merchants").status_code == 401
    assert client.get("/v1/api/commerce/healthz").status_code == 200
    after = samples(client)
    assert after[key_4xx] == before.get(key_4xx, 0) + 1 and after[key_2xx] == before.get(key_2xx, 0) + 1
    lags = {name for name in after if name.startswith("merchant_platform_consumer_lag{")}
    assert any('consumer="inventory.payment-success"' in name for name in lags), sorted(lags)
    assert "payment_pending_queue" in after and "payment_webhook_error_ratio" in after


def test_a_broker_that_does_not_answer_leaves_the_lag_out_and_the_page_answers(client, settings, caplog):
    settings.METRICS_ENABLED = True
    settings.OUTREACH_METRICS_ENABLED = False
    caplog.set_level(logging.WARNING, logger="merchant_platform.metrics")
    with socket.socket() as bound:  # bound, never listening: a broker that refuses every connection
        bound.bind(("127.0.0.1", 0))
        settings.KAFKA_BOOTSTRAP_SERVERS = [f"127.0.0.1:{bound.getsockname()[1]}"]
        page = samples(client)
    assert not [name for name in page if name.startswith("merchant_platform_consumer_lag")]
    assert "payment_pending_queue" in page and any(name.startswith("merchant_platform_http_responses_total") for name in page)
    (logged,) = [record.msg for record in caplog.records if "metrics.consumer_lag_unavailable" in record.getMessage()]
    assert logged["error"] in {"KafkaTimeoutError", "NoBrokersAvailable"}  # bootstrap gave up (5 s)
