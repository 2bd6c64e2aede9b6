"""Reads of commerce that are more than a one-line query."""

from __future__ import annotations

import re
import time

from django.conf import settings
from django.contrib.postgres.lookups import TrigramWordSimilar
from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank, TrigramWordSimilarity
from django.core.cache import cache
from django.db import DatabaseError, connections, transaction
from django.db.models import Count, F, Q, QuerySet, Sum

from apps.commerce.models import Product, ProductMedia, ProductVariant
from apps.commerce.sales import selectors as sales
from merchant_platform.errors import InvalidInput
from merchant_platform.logging import get_logger
from merchant_platform.models import Configuration

log = get_logger(__name__)

POLICY_DB = "default"  # Configuration lives in the shared `public` schema


def integrations() -> QuerySet[Configuration]:
    """Every live provider integration of every merchant (views scope it per caller)."""
    return Configuration.objects.using(POLICY_DB).filter(
        group=Configuration.Group.INTEGRATION, principal_type=Configuration.PrincipalType.MERCHANT
    )


# --- Footer summary (spec 1.3): per-merchant figures (services/caches.py caches them in Redis) ------


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
        "orders": sales.orders_by_status(merchant_id),
        "revenueThisMonth": sales.revenue_this_month(merchant_id),
    }


# --- Search (spec 1.3): PostgreSQL full-text search over ProductSearchDocument ----------------------
# Staleness: every catalog write marks the time of the change in Redis after its commit, and the sync
# worker marks the time it last indexed. When a change is older than COMMERCE_SEARCH_STALE_SECONDS
# and nothing was indexed since, the index is behind (the worker role is off or down) and searches
# answer from the catalog tables instead, saying so in `X-Search-Source`.

SEARCH_CHANGED_KEY, SEARCH_INDEXED_KEY = "commerce:search:changed_ms", "commerce:search:indexed_ms"  # services/caches.py writes them
PRICE_BUCKETS = ((0, 1_000), (1_000, 5_000), (5_000, 10_000), (10_000, None))  # minor units, [from, to)
MAX_TERMS = 8
FACET_STATUSES = ("PUBLISHED", "ARCHIVED")
TYPO_SIMILARITY = 0.3


def _now_ms() -> int:
    return int(time.time() * 1000)


def search_index_stale() -> bool:
    """Is the index behind the catalog by more than COMMERCE_SEARCH_STALE_SECONDS? Unknown (Redis
    down) counts as not stale: the index is still the better answer."""
    try:
        marks = cache.get_many([SEARCH_CHANGED_KEY, SEARCH_INDEXED_KEY])
    except Exception:
        return False
    changed, indexed = marks.get(SEARCH_CHANGED_KEY), marks.get(SEARCH_INDEXED_KEY)
    if changed is None or (indexed is not None and indexed >= changed):
        return False
    return _now_ms() - changed > settings.COMMERCE_SEARCH_STALE_SECONDS * 1000


def search_words(text: str) -> list[str]:
    """The runs of letters and digits of `text`, lowercased: the words of a query, and what a SKU is
    indexed as. PostgreSQL's parser reads `-123` in `ABC-123` as a signed number (the lexeme `-123`),
    which the query word `123` never matches; split the same way on both sides, `ABC-123` is `abc`
    and `123` in the document and in the query."""
    return [word.lower() for word in re.findall(r"[^\W_]+", text)]


def search_terms(q: str) -> list[str]:
    """The words of a query, at most MAX_TERMS."""
    return search_words(q)[:MAX_TERMS]


def _prefix_query(terms: list[str]) -> SearchQuery:
    # Each term also matches as a prefix ("lam" finds "lamp"); terms are letters and digits only, so the raw
    # tsquery syntax cannot be injected.
    return SearchQuery(" & ".join(f"{term}:*" for term in terms), search_type="raw", config="simple")


def _count_and_facets(matched: QuerySet) -> tuple[int, dict]:
    """The number of matches and their facets (count by status, price buckets of the lowest
    price), in one aggregate over the matches."""
    figures = {"count": Count("pk")} | {status: Count("pk", filter=Q(status=status)) for status in FACET_STATUSES}
    for low, high in PRICE_BUCKETS:
        condition = Q(min_price_amount__gte=low) & (Q(min_price_amount__lt=high) if high is not None else Q())
        figures[f"{low}-{high if high is not None else ''}"] = Count("pk", filter=condition)
    values = matched.aggregate(**figures)
    facets = {
        "status": {status: values[status] for status in FACET_STATUSES},
        "price": [{"from": low, "to": high, "count": values[f"{low}-{high if high is not None else ''}"]} for low, high in PRICE_BUCKETS],
    }
    return values["count"], facets


def _hits(matched: QuerySet, query: SearchQuery, *, limit: int) -> list:
    """The best `limit` matches by rank, with highlights (computed for those rows only)."""
    rows = matched.defer("search_vector", "skus").annotate(
        name_highlight=SearchHeadline("name", query, config="simple", start_sel="<mark>", stop_sel="</mark>", highlight_all=True),
        description_highlight=SearchHeadline(
            "description", query, config="simple", start_sel="<mark>", stop_sel="</mark>", max_words=20, min_words=5
        ),
    )
    return list(rows.order_by("-rank", "product_id")[:limit])


def search_index(documents: QuerySet, terms: list[str], *, limit: int) -> dict:
    """Full-text matches (weighted: name and SKUs over description) with highlights and facets; when
    nothing matches, names within typo distance (pg_trgm word similarity)."""
    query = _prefix_query(terms)
    matched = documents.filter(search_vector=query)
    results = _hits(matched.annotate(rank=SearchRank(F("search_vector"), query)), query, limit=limit)
    if results:
        count, facets = _count_and_facets(matched)
        return {"results": results, "count": count, "facets": facets, "typoTolerant": False}
    text = " ".join(terms)
    with transaction.atomic(using=documents.db):
        # The `%>` operator (what the trigram GIN index on the name answers) compares with this
        # transaction's threshold; the similarity filter below states the rule itself.
        with connections[documents.db].cursor() as cursor:
            cursor.execute("SELECT set_config('pg_trgm.word_similarity_threshold', %s, true)", [str(TYPO_SIMILARITY)])
        similar = documents.filter(TrigramWordSimilar(F("name"), text)).annotate(rank=TrigramWordSimilarity(text, "name"))
        matched = similar.filter(rank__gte=TYPO_SIMILARITY)
        results = _hits(matched, SearchQuery(" | ".join(terms), search_type="raw", config="simple"), limit=limit)
        count, facets = _count_and_facets(matched)
    return {"results": results, "count": count, "facets": facets, "typoTolerant": True}


def search_fallback(products: QuerySet, terms: list[str], *, limit: int) -> dict:
    """The plain filtered query used while the index is down or behind: names containing every term."""
    for term in terms:
        products = products.filter(name__icontains=term)
    return {"results": list(products.order_by("name", "pk")[:limit]), "count": products.count(), "facets": None, "typoTolerant": False}


def product_search(documents: QuerySet, products: QuerySet, params: dict) -> tuple[dict, str | None]:
    """Search (`params`: the validated query) the index's `documents`, or the catalog's `products`
    while the index is behind or unavailable; both already scoped to the caller. Returns the answer
    (with its `source`) and why it fell back (`stale`, `unavailable`), None from the index."""
    terms = search_terms(params["q"])
    if not terms:
        raise InvalidInput({"q": "Give at least one word (letters or digits)."})
    filters = {key: params[key] for key in ("merchant_id", "status") if key in params}
    if "min_price" in params:
        filters["min_price_amount__gte"] = params["min_price"]
    if "max_price" in params:
        filters["max_price_amount__lte"] = params["max_price"]
    reason = "stale" if search_index_stale() else None
    if reason is None:
        try:
            result = search_index(documents.filter(**filters), terms, limit=params["limit"])
        except DatabaseError as exc:
            log.error("commerce.search_index_unavailable", error=type(exc).__name__)
            reason = "unavailable"
    if reason is not None:
        catalog = products.filter(status__in=[Product.Status.PUBLISHED, Product.Status.ARCHIVED])
        fallback_filters = {key: value for key, value in filters.items() if key in ("merchant_id", "status")}
        result = search_fallback(catalog.filter(**fallback_filters), terms, limit=params["limit"])
    return {**result, "source": "fallback" if reason else "index"}, reason
