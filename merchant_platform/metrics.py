"""Prometheus metrics of a process at GET /metrics (the process root, never under a service prefix:
the gateway does not route it, a scraper reaches each process directly), when METRICS_ENABLED (or
outreach's OUTREACH_METRICS_ENABLED, the spec's name, spec 4.1) is on. The alerts of spec 8 and the
metric behind each are in docs/operations.md ("Alerts").

- `merchant_platform_http_responses_total{service, status_class}`: every API response, counted by
  the request middleware (5xx rate alert).
- `merchant_platform_consumer_lag{consumer, group}`: records a Kafka consumer group has not
  committed yet, read from the broker at scrape time for the active services' consumers (inventory
  consumer lag alert).
- `merchant_platform_outbox_parked{table}`: outbox rows the relay parked (events it can never send
  as they are; docs/events.md), counted at scrape time.
- what services register with `register_scrape_collector` (payment's pending queue, webhook
  failures), collected at scrape time.

Under a pre-forking server set PROMETHEUS_MULTIPROC_DIR: counters of every worker add up, and the
scrape-time collectors are read once per page.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily

from merchant_platform.errors import problem_response
from merchant_platform.logging import get_logger
from merchant_platform.messaging.monitoring import OutboxParkedCollector

log = get_logger(__name__)

HTTP_RESPONSES = Counter(
    "merchant_platform_http_responses", "API responses by service and status class (2xx, 4xx, 5xx...).", ["service", "status_class"]
)
_scrape_collectors: list = []


def register_scrape_collector(collector) -> None:
    """A collector computed when the page is scraped (a count in the database, say): on every page,
    in multiprocess mode too."""
    _scrape_collectors.append(collector)
    REGISTRY.register(collector)


class ConsumerLagCollector:
    """The lag of every registered consumer of the active services, from the broker. A broker that
    does not answer leaves the gauge out of the page (logged) rather than failing the scrape."""

    def describe(self):
        return [GaugeMetricFamily("merchant_platform_consumer_lag", "")]

    def collect(self):
        from merchant_platform.messaging.lag import group_lag
        from merchant_platform.messaging.registry import registered_consumers

        gauge = GaugeMetricFamily(
            "merchant_platform_consumer_lag",
            "Records a consumer group has not committed yet, over its topics (spec 8: inventory's alert above 10,000).",
            labels=["consumer", "group"],
        )
        try:
            for spec in registered_consumers():
                lag = group_lag(spec.group_id, spec.topics)
                gauge.add_metric([spec.name, spec.group_id], sum(sum(partitions.values()) for partitions in lag.values()))
        except Exception as exc:  # the broker is down or slow: the page still answers
            log.warning("metrics.consumer_lag_unavailable", error=type(exc).__name__)
            return
        yield gauge


def enabled() -> bool:
    return settings.METRICS_ENABLED or getattr(settings, "OUTREACH_METRICS_ENABLED", False)


def exposition() -> tuple[bytes, str]:
    """The page: this process's registry, or every worker's counters plus the scrape-time collectors
    when multiprocess mode is on."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        for collector in _scrape_collectors:
            registry.register(collector)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST


def metrics_view(request):
    if not enabled():
        return problem_response(404, detail="Metrics are disabled (METRICS_ENABLED).")
    body, content_type = exposition()
    return HttpResponse(body, content_type=content_type)


if settings.METRICS_CONSUMER_LAG:
    register_scrape_collector(ConsumerLagCollector())
register_scrape_collector(OutboxParkedCollector())
