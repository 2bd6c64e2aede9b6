"""Celery tasks of commerce: the product sync of the search index (queue SYNC_PRODUCT_QUEUE, the
worker role, spec 1.3/1.4), the sweep that removes the objects of deleted media and the expiry of
unpaid sale orders and the resumption of pending returns (queue `commerce`)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from apps.commerce import services
from apps.commerce.sales import services as sales
from merchant_platform.celery import SYNC_PRODUCT_QUEUE, register_periodic_task
from merchant_platform.logging import get_logger

log = get_logger(__name__)


@shared_task(
    name="apps.commerce.tasks.sync_products",
    named_queue=SYNC_PRODUCT_QUEUE,
    ignore_result=True,
    # A task that fails is acknowledged (acks_late only redelivers a killed worker's): a database
    # that went away is retried rather than leaving the documents stale until the next change.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=8,
)
def sync_products(product_ids: list[int]) -> int:
    """SyncProductWorker: make the search documents of a consumer poll's products match their rows.
    Idempotent and order-free (it reads the current rows), so a redelivery after a killed worker
    converges."""
    indexed = services.search_sync_products(product_ids=product_ids)
    services.search_indexed()
    return indexed


@shared_task(name="apps.commerce.tasks.sweep_deleted_media", ignore_result=True)
def sweep_deleted_media() -> int:
    removed = services.media_sweep(grace_seconds=settings.COMMERCE_MEDIA_SWEEP_GRACE_SECONDS)
    if removed:
        log.info("commerce.media_objects_removed", objects=removed)
    return removed


register_periodic_task(
    "apps.commerce.tasks.sweep_deleted_media",
    task=sweep_deleted_media.name,
    schedule=settings.COMMERCE_MEDIA_SWEEP_INTERVAL_SECONDS,
)


@shared_task(name="apps.commerce.tasks.expire_sale_orders", ignore_result=True)
def expire_sale_orders() -> int:
    """PLACED orders unpaid past COMMERCE_ORDER_PAYMENT_WINDOW_SECONDS expire (their reservation
    released, their payment cancelled); releases that did not go through are retried."""
    expired = sales.orders_expire_due()
    if expired:
        log.info("commerce.sale_orders_expired", orders=expired)
    return expired


register_periodic_task(
    "apps.commerce.tasks.expire_sale_orders",
    task=expire_sale_orders.name,
    schedule=settings.COMMERCE_ORDER_EXPIRY_SWEEP_SECONDS,
)


@shared_task(name="apps.commerce.tasks.resume_sale_returns", ignore_result=True)
def resume_sale_returns() -> int:
    """PENDING returns whose refund payment did not answer for, or whose outcome no webhook told,
    are asked of payment again (the same Idempotency-Key) or read there."""
    resolved = sales.returns_resume()
    if resolved:
        log.info("commerce.sale_returns_resolved", returns=resolved)
    return resolved


register_periodic_task(
    "apps.commerce.tasks.resume_sale_returns",
    task=resume_sale_returns.name,
    schedule=settings.COMMERCE_ORDER_EXPIRY_SWEEP_SECONDS,
)
