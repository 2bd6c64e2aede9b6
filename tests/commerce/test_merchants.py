"""Merchants through HTTP with real tokens and policies: CRUD, the creator's membership, who sees
which merchant, and bad input answered in the shared error shape."""

from __future__ import annotations

import pytest

from apps.commerce.models import Merchant
from merchant_platform.policy import load_grants
from tests.commerce.conftest import new_merchant, new_product
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
URL = "/v1/api/commerce/merchants"
BODY = {"name": "Lamp Shop", "slug": "lamp-shop", "legalName": "Lamp Shop SARL", "defaultCurrency": "EUR", "country": "FR"}


def test_an_owner_creates_a_merchant_joins_it_and_sees_only_its_own(owner):
    client = owner.client()
    response = client.post(URL, {**BODY, "timezone": "Europe/Paris"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["slug"] == "lamp-shop" and body["status"] == "ACTIVE" and body["timezone"] == "Europe/Paris"
    assert body["createdBy"] == str(owner.user_id) and isinstance(body["id"], str)
    assert body["id"] in load_grants(owner.user_id).domains  # the join_domain grant
    other = new_merchant(created_by=None)
    listed = client.get(URL).json()
    assert [row["id"] for row in listed["results"]] == [body["id"]]
    assert client.get(f"{URL}/{body['id']}").status_code == 200
    assert client.get(f"{URL}/{other.id}").status_code == 404


def test_staff_with_a_membership_see_their_merchant_and_may_not_edit_it(seeded):
    mine, theirs = new_merchant(), new_merchant()
    staff = make_caller(roles=[("EMPLOYEE", mine.id)]).client()
    assert [row["id"] for row in staff.get(URL).json()["results"]] == [str(mine.id)]
    assert staff.get(f"{URL}/{theirs.id}").status_code == 404
    refused = staff.patch(f"{URL}/{mine.id}", {"name": "Mine now"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "FORBIDDEN"
    assert staff.post(URL, BODY, format="json").status_code == 403  # no grant everywhere: no new merchant


def test_update_and_delete(owner):
    client = owner.client()
    merchant_id = client.post(URL, BODY, format="json").json()["id"]
    changed = client.patch(f"{URL}/{merchant_id}", {"status": "SUSPENDED", "defaultCurrency": "JPY"}, format="json")
    assert changed.status_code == 200 and (changed.json()["status"], changed.json()["defaultCurrency"]) == ("SUSPENDED", "JPY")
    assert client.delete(f"{URL}/{merchant_id}").status_code == 204
    assert client.get(f"{URL}/{merchant_id}").status_code == 404
    assert Merchant.all_objects.get(pk=merchant_id).deleted_at is not None  # soft


def test_a_merchant_with_products_is_not_deleted(owner):
    client = owner.client()
    merchant_id = int(client.post(URL, BODY, format="json").json()["id"])
    new_product(merchant_id)
    response = client.delete(f"{URL}/{merchant_id}")
    assert response.status_code == 409 and response.json()["code"] == "MERCHANT_NOT_EMPTY"


def test_slug_is_unique_among_live_merchants(owner):
    client = owner.client()
    first = client.post(URL, BODY, format="json").json()["id"]
    clash = client.post(URL, BODY, format="json")
    assert clash.status_code == 409 and clash.json()["code"] == "MERCHANT_SLUG_TAKEN"
    assert client.delete(f"{URL}/{first}").status_code == 204
    assert client.post(URL, BODY, format="json").status_code == 201  # a deleted merchant frees its slug


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"defaultCurrency": "EURO"}, "defaultCurrency"),
        ({"defaultCurrency": "eur"}, "defaultCurrency"),
        ({"defaultCurrency": "XXX"}, "defaultCurrency"),
        ({"country": "ZZ"}, "country"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"slug": "Not a slug"}, "slug"),
        ({"slug": 42}, "slug"),
        ({"status": "CLOSED"}, "status"),
        ({"name": "a\nb"}, "name"),
        ({"id": "1"}, "id"),
        ({"createdBy": "1"}, "createdBy"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(owner, change, field):
    response = owner.client().post(URL, {**BODY, **change}, format="json")
    assert response.status_code == 400
    problem = response.json()
    assert problem["code"] == "VALIDATION_ERROR" and field in {error["field"] for error in problem["errors"]}


def test_anonymous_is_refused(client):
    assert client.get(URL).status_code == 401


def test_list_filters_orders_and_pages(seeded):
    admin = make_caller(roles=["ADMIN"]).client()
    for slug in ("b-shop", "a-shop", "c-shop"):
        new_merchant(slug=slug, country="DE" if slug != "c-shop" else "FR")
    page = admin.get(URL, {"country": "DE", "ordering": "slug", "pageSize": 1}).json()
    assert page["count"] == 2 and [row["slug"] for row in page["results"]] == ["a-shop"] and page["next"]
    assert admin.get(URL, {"pageSize": 0}).status_code == 400
    assert admin.get(URL, {"status": "GONE"}).status_code == 400


def test_the_creator_runs_its_new_merchant_catalog_and_integrations(owner):
    client = owner.client()
    merchant_id = client.post(URL, BODY, format="json").json()["id"]
    product = client.post("/v1/api/commerce/products", {"merchantId": merchant_id, "name": "Lamp"}, format="json")
    assert product.status_code == 201, product.content
    variant = {"primaryProductId": product.json()["id"], "sku": "L-1", "priceAmount": 100, "currency": "EUR"}
    assert client.post("/v1/api/commerce/variants", variant, format="json").status_code == 201
    integration = {"merchantId": merchant_id, "code": "VNPAY", "credential": "credential-of-the-owner"}
    assert client.post("/v1/api/commerce/integrations", integration, format="json").status_code == 201
    assert client.get(f"{URL}/{merchant_id}/summary").json()["variants"]["ACTIVE"] == 1
