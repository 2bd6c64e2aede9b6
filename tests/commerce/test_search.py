"""Product search on PostgreSQL full-text search: prefixes, weights, highlights, facets, typos, the
tenant scope, documents leaving the index, the rebuild command, and the fallback to the catalog
tables while the index is behind."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connections

from apps.commerce import services
from apps.commerce.models import ProductSearchDocument
from tests.commerce.conftest import new_merchant, new_product, new_variant
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
URL = "/v1/api/commerce/products/search"


@pytest.fixture
def catalog(seeded, settings):
    settings.COMMERCE_SEARCH_STALE_SECONDS = 3600
    merchant = new_merchant()
    lamp = new_product(merchant.id, name="Brass desk lamp", description="A warm reading light for the desk.", status="PUBLISHED")
    new_variant(lamp.id, sku="LAMP-S", price_amount=2500)
    new_variant(lamp.id, sku="LAMP-L", price_amount=12000)
    chair = new_product(merchant.id, name="Oak chair", description="Goes with the lamp.", status="ARCHIVED")
    new_variant(chair.id, sku="CHAIR-1", price_amount=800)
    draft = new_product(merchant.id, name="Lamp prototype", status="DRAFT")
    assert services.search_sync_products(product_ids=[lamp.id, chair.id, draft.id]) == 2  # the draft stays out
    services.search_indexed()
    return merchant, lamp, chair, draft, make_caller(roles=[("EMPLOYEE", merchant.id)]).client()


def test_prefix_search_ranks_names_first_with_highlights_and_facets(catalog):
    _merchant, lamp, chair, _draft, client = catalog
    response = client.get(URL, {"q": "lam"})
    assert response.status_code == 200 and response["X-Search-Source"] == "index"
    body = response.json()
    assert [hit["id"] for hit in body["results"]] == [str(lamp.id), str(chair.id)]  # name (A) before description (B); no draft
    top = body["results"][0]
    assert (top["minPriceAmount"], top["maxPriceAmount"], top["currency"]) == (2500, 12000, "EUR")
    assert "<mark>lamp</mark>" in top["highlights"]["name"].lower()
    assert body["count"] == 2 and body["facets"]["status"] == {"PUBLISHED": 1, "ARCHIVED": 1}
    assert {(b["from"], b["count"]) for b in body["facets"]["price"]} == {(0, 1), (1000, 1), (5000, 0), (10000, 0)}
    assert [hit["id"] for hit in client.get(URL, {"q": "lamp-s"}).json()["results"]] == [str(lamp.id)]  # SKUs
    assert [h["id"] for h in client.get(URL, {"q": "lamp", "status": "ARCHIVED"}).json()["results"]] == [str(chair.id)]
    assert [h["id"] for h in client.get(URL, {"q": "lamp", "maxPriceAmount": 1000}).json()["results"]] == [str(chair.id)]


def test_a_sku_with_a_hyphen_before_digits_is_found(catalog):
    """PostgreSQL's parser reads `-123` as a signed number: SKUs are indexed as their words."""
    merchant, lamp, *_, client = catalog
    mug = new_product(merchant.id, name="Mug", status="PUBLISHED")
    new_variant(mug.id, sku="ABC-123", price_amount=900)
    new_variant(lamp.id, sku="ABC-999", price_amount=3000)
    services.search_sync_products(product_ids=[mug.id, lamp.id])
    for q in ("ABC-123", "abc-123", "abc 123", "ABC-12", "123"):
        assert [hit["id"] for hit in client.get(URL, {"q": q}).json()["results"]] == [str(mug.id)], q
    assert {hit["id"] for hit in client.get(URL, {"q": "ABC"}).json()["results"]} == {str(mug.id), str(lamp.id)}


def test_a_typo_still_finds_the_product(catalog):
    _, lamp, *_, client = catalog
    body = client.get(URL, {"q": "brass dsek lmap"}).json()
    assert body["typoTolerant"] is True and body["results"][0]["id"] == str(lamp.id)
    assert body["count"] == 1 and body["facets"]["status"] == {"PUBLISHED": 1, "ARCHIVED": 0}


def test_the_search_indexes_keep_no_pending_list():
    """Every sync rewrites a document: GIN's pending list would be read in full by every search."""
    with connections["commerce"].cursor() as cursor:
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN ('product_search_vector', 'product_search_name_trgm')")
        assert dict(cursor.fetchall()) == {"product_search_vector": ["fastupdate=off"], "product_search_name_trgm": ["fastupdate=off"]}


def test_deleted_or_unpublished_products_leave_the_index_and_replays_change_nothing(catalog):
    _, lamp, chair, _, client = catalog
    services.product_update(product_id=lamp.id, status="DRAFT")
    services.product_delete(product_id=chair.id)
    for _ in range(2):  # a replayed sync is harmless
        assert services.search_sync_products(product_ids=[lamp.id, chair.id]) == 0
    assert client.get(URL, {"q": "lamp"}).json()["results"] == []
    assert not ProductSearchDocument.objects.exists()


def test_another_merchants_products_are_not_found(catalog):
    stranger = make_caller(roles=[("EMPLOYEE", new_merchant().id)]).client()
    assert stranger.get(URL, {"q": "lamp"}).json()["count"] == 0


def test_reindex_rebuilds_from_scratch(catalog):
    _, lamp, chair, *_ = catalog
    ProductSearchDocument.objects.filter(pk=lamp.id).update(name="garbage")
    ProductSearchDocument.objects.create(product_id=1, merchant_id=1, name="orphan", status="PUBLISHED", source_updated_at=lamp.updated_at)
    call_command("reindex_products", batch_size=1)  # a batch per product: each batch's work is kept
    assert set(ProductSearchDocument.objects.values_list("product_id", "name")) == {(lamp.id, lamp.name), (chair.id, chair.name)}


def test_a_stale_index_falls_back_to_the_catalog_and_says_so(catalog, settings):
    _, lamp, _chair, _, client = catalog
    settings.COMMERCE_SEARCH_STALE_SECONDS = 0
    renamed = new_product(lamp.merchant_id, name="Floor lamp", status="PUBLISHED")  # not indexed: no worker ran
    services.search_changed()
    response = client.get(URL, {"q": "lamp"})
    assert response["X-Search-Source"] == "fallback" and response["X-Search-Fallback-Reason"] == "stale"
    assert {hit["id"] for hit in response.json()["results"]} == {str(lamp.id), str(renamed.id)}
    assert response.json()["facets"] is None
    services.search_sync_products(product_ids=[renamed.id])
    services.search_indexed()
    assert client.get(URL, {"q": "lamp"})["X-Search-Source"] == "index"


@pytest.mark.parametrize(
    "params", [{}, {"q": ""}, {"q": "!!!"}, {"q": "x", "limit": 0}, {"q": "x", "status": "DRAFT"}, {"q": "x", "bogus": 1}]
)
def test_bad_queries_are_400(catalog, params):
    assert catalog[-1].get(URL, params).status_code == 400


@pytest.mark.django_db(databases="__all__", transaction=True)  # a failed index query must not poison the request
def test_an_unavailable_index_falls_back_to_the_catalog(seeded, settings):
    settings.COMMERCE_SEARCH_STALE_SECONDS = 3600
    merchant = new_merchant()
    lamp = new_product(merchant.id, name="Desk lamp", status="PUBLISHED")
    client = make_caller(roles=[("EMPLOYEE", merchant.id)]).client()
    with connections["commerce"].cursor() as cursor:
        cursor.execute("ALTER TABLE product_search_document RENAME TO product_search_document_away")
    try:
        response = client.get(URL, {"q": "lamp"})
    finally:
        with connections["commerce"].cursor() as cursor:
            cursor.execute("ALTER TABLE product_search_document_away RENAME TO product_search_document")
    assert response.status_code == 200 and response["X-Search-Fallback-Reason"] == "unavailable"
    assert [hit["id"] for hit in response.json()["results"]] == [str(lamp.id)]
