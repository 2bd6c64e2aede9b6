"""Commerce's bookkeeping in Redis: the footer-summary cache (read through, retired after each write
that changes a figure) and the marks of when the catalog last changed and when the search index was
last written (selectors.search_index_stale compares them). Redis not answering never fails a write
or a read: the summary is computed directly and a lost mark only delays the staleness signal."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache

from apps.commerce import selectors
from merchant_platform.logging import get_logger

log = get_logger(__name__)


# --- Footer summary (spec 1.3): per-merchant figures, cached in Redis -----------------------------
# Cached under a versioned key: every write that changes a figure bumps the merchant's version after
# its commit, so a summary computed from rows read before that commit is never served again.


def _version_key(merchant_id: int) -> str:
    return f"commerce:summary:version:{merchant_id}"


def _summary_version(merchant_id: int) -> int:
    key = _version_key(merchant_id)
    cache.add(key, 0, timeout=None)
    return int(cache.get(key, 0))


def summary_retire(merchant_id: int) -> None:
    """Retire the merchant's cached summary (call after the commit of a write that changes it)."""
    key = _version_key(merchant_id)
    try:
        if not cache.add(key, 1, timeout=None):
            cache.incr(key)
    except Exception as exc:  # Redis down: the cached entry expires after COMMERCE_SUMMARY_CACHE_SECONDS
        log.warning("commerce.summary_invalidation_failed", merchantId=str(merchant_id), error=type(exc).__name__)


def merchant_summary(merchant_id: int) -> tuple[dict, bool]:
    """The merchant's summary and whether it came from the cache; computed (and cached) on a miss,
    computed directly when Redis does not answer."""
    try:
        key = f"commerce:summary:{merchant_id}:{_summary_version(merchant_id)}"
        cached = cache.get(key)
    except Exception as exc:
        log.warning("commerce.summary_cache_unavailable", error=type(exc).__name__)
        return selectors.compute_summary(merchant_id), False
    if cached is not None:
        return cached, True
    summary = selectors.compute_summary(merchant_id)
    try:
        cache.set(key, summary, timeout=settings.COMMERCE_SUMMARY_CACHE_SECONDS)
    except Exception as exc:
        log.warning("commerce.summary_cache_unavailable", error=type(exc).__name__)
    return summary, False


# --- Search staleness marks -----------------------------------------------------------------------


def _mark(key: str) -> None:
    try:
        cache.set(key, int(time.time() * 1000), timeout=None)
    except Exception as exc:
        log.warning("commerce.search_mark_failed", key=key, error=type(exc).__name__)


def search_changed() -> None:
    """The catalog changed (call after the commit of a product or variant write)."""
    _mark(selectors.SEARCH_CHANGED_KEY)


def search_indexed() -> None:
    """The index was written (the sync worker and the reindex command)."""
    _mark(selectors.SEARCH_INDEXED_KEY)
