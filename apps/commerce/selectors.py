"""Reads of commerce that are more than a one-line query."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, QuerySet, Sum

from apps.commerce.models import Product, ProductMedia, ProductVariant
from merchant_platform.logging import get_logger
from merchant_platform.models import Configuration

log = get_logger(__name__)

POLICY_DB = "default"  # Configuration lives in the shared `public` schema


def integrations() -> QuerySet[Configuration]:
    """Every live provider integration of every merchant (views scope it per caller)."""
    return Configuration.objects.using(POLICY_DB).filter(
        group=Configuration.Group.INTEGRATION, principal_type=Configuration.PrincipalType.MERCHANT
    )


# --- Footer summary (spec 1.3): per-merchant figures, cached in Redis -----------------------------
# Cached under a versioned key: every write that changes a figure bumps the merchant's version after
# its commit, so a summary computed from rows read before that commit is never served again.


def _version_key(merchant_id: int) -> str:
    return f"commerce:summary:version:{merchant_id}"


def _summary_version(merchant_id: int) -> int:
    key = _version_key(merchant_id)
    cache.add(key, 0, timeout=None)
    return int(cache.get(key, 0))


def summary_changed(merchant_id: int) -> None:
    """Retire the merchant's cached summary (call after the commit of a write that changes it)."""
    key = _version_key(merchant_id)
    try:
        if not cache.add(key, 1, timeout=None):
            cache.incr(key)
    except Exception as exc:  # Redis down: the cached entry expires after COMMERCE_SUMMARY_CACHE_SECONDS
        log.warning("commerce.summary_invalidation_failed", merchantId=str(merchant_id), error=type(exc).__name__)


def _by_status(queryset) -> dict[str, int]:
    return {row["status"]: row["n"] for row in queryset.values("status").annotate(n=Count("id")).order_by("status")}


def compute_summary(merchant_id: int) -> dict:
    products = Product.objects.filter(merchant_id=merchant_id)
    variants = ProductVariant.objects.filter(merchant_id=merchant_id)
    media = ProductMedia.objects.filter(merchant_id=merchant_id).aggregate(count=Count("id"), bytes=Sum("size_bytes"))
    return {
        "merchantId": str(merchant_id),
        "products": {status: 0 for status in Product.Status.values} | _by_status(products),
        "variants": {status: 0 for status in ProductVariant.Status.values} | _by_status(variants),
        "media": {"count": media["count"], "bytes": media["bytes"] or 0},
        "integrations": {status: 0 for status in Configuration.Status.values} | _by_status(integrations().filter(principal_id=merchant_id)),
    }


def merchant_summary(merchant_id: int) -> tuple[dict, bool]:
    """The merchant's summary and whether it came from the cache; computed (and cached) on a miss,
    computed directly when Redis does not answer."""
    try:
        key = f"commerce:summary:{merchant_id}:{_summary_version(merchant_id)}"
        cached = cache.get(key)
    except Exception as exc:
        log.warning("commerce.summary_cache_unavailable", error=type(exc).__name__)
        return compute_summary(merchant_id), False
    if cached is not None:
        return cached, True
    summary = compute_summary(merchant_id)
    try:
        cache.set(key, summary, timeout=settings.COMMERCE_SUMMARY_CACHE_SECONDS)
    except Exception as exc:
        log.warning("commerce.summary_cache_unavailable", error=type(exc).__name__)
    return summary, False
