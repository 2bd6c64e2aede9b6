"""The search pipeline end to end on the real components: a product write reaches the WAL, the CDC
relay publishes it, the worker role's consumer enqueues a sync on SYNC_PRODUCT_QUEUE, a real Celery
worker indexes it, and the search answers from the index within seconds; with the sync worker killed,
changes wait in the queue and the index converges once a worker runs again."""

from __future__ import annotations

import signal
import threading
import time

import pytest
import redis
from django.conf import settings

from apps.commerce import consumers, services
from apps.commerce.models import ProcessedMessage, ProductSearchDocument
from merchant_platform.cdc import Capture
from merchant_platform.celery import SYNC_PRODUCT_QUEUE
from merchant_platform.messaging.registry import ConsumerSpec
from merchant_platform.messaging.runner import ConsumerRunner
from tests.commerce.conftest import new_merchant, new_product, new_variant
from tests.kernel.events.test_celery import start_worker  # noqa: F401 (fixture)
from tests.support.broker import unique
from tests.support.cdc import commerce_relay
from tests.support.waiting import patience, wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


@pytest.fixture
def pipeline(make_topic, slot, test_database_url):
    """The relay and the consumer in threads of this process, on topics of this test."""
    product_topic, variant_topic = make_topic(prefix="product"), make_topic(prefix="product-variant")
    relay = commerce_relay(
        slot,
        [Capture(topic=product_topic, model="commerce.Product"), Capture(topic=variant_topic, model="commerce.ProductVariant")],
        poll_interval=0.05,
    )
    relay.setup()
    spec = ConsumerSpec(
        name=unique("commerce.product-search"),
        topics=(product_topic, variant_topic),
        handler=consumers.products_changed,
        batch=True,
        group_id=unique("commerce-test-group"),
        alias="commerce",
        processed_model=ProcessedMessage,
    )
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(SYNC_PRODUCT_QUEUE)  # nothing left from other runs
    stop = threading.Event()
    threads = [
        threading.Thread(target=relay.run, args=(stop,), daemon=True),
        threading.Thread(target=ConsumerRunner(spec, stop).run, daemon=True),
    ]
    for thread in threads:
        thread.start()
    yield {"DATABASE_URL": test_database_url}
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    relay.close()


def indexed_name(product_id: int) -> str | None:
    return ProductSearchDocument.objects.filter(pk=product_id).values_list("name", flat=True).first()


def test_a_write_reaches_the_index_and_converges_after_a_killed_sync_worker(pipeline, start_worker):  # noqa: F811
    worker = start_worker(SYNC_PRODUCT_QUEUE, **pipeline)
    merchant = new_merchant()
    started = time.monotonic()
    lamp = new_product(merchant.id, name="Brass lamp", status="PUBLISHED")
    wait_for(lambda: indexed_name(lamp.id) == "Brass lamp", timeout=30, message="the product indexed")
    assert time.monotonic() - started < patience(15)  # "within seconds", with the suite's patience
    new_variant(lamp.id, price_amount=4200)  # a variant change re-syncs its product
    wait_for(lambda: ProductSearchDocument.objects.get(pk=lamp.id).min_price_amount == 4200, timeout=30, message="price indexed")

    worker.signal(signal.SIGKILL, group=True)
    worker.wait(timeout=10)
    services.product_update(product_id=lamp.id, name="Copper lamp")
    draft = new_product(merchant.id, name="Secret prototype", status="PUBLISHED")
    services.product_update(product_id=draft.id, status="DRAFT")  # unpublished before any worker saw it
    time.sleep(2)
    assert indexed_name(lamp.id) == "Brass lamp"  # no worker: the syncs wait in the queue

    start_worker(SYNC_PRODUCT_QUEUE, **pipeline)
    wait_for(lambda: indexed_name(lamp.id) == "Copper lamp", timeout=40, message="the index converged")
    wait_for(lambda: redis.Redis.from_url(settings.CELERY_BROKER_URL).llen(SYNC_PRODUCT_QUEUE) == 0, timeout=30, message="queue drained")
    time.sleep(1)
    assert indexed_name(draft.id) is None
