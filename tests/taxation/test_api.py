"""Taxation over HTTP: tax groups, tax sets, provisioning (spec 4.6, 7), with JWT and with Basic."""

from __future__ import annotations

import logging

import pytest

from apps.taxation import services
from apps.taxation.models import Product, TaxGroup, TaxItem, TaxSet
from merchant_platform.errors import ApiError
from tests.taxation.conftest import BASE, MERCHANT, OTHER_MERCHANT, item, learn_product

pytestmark = pytest.mark.django_db(databases="__all__")

GROUP = {
    "merchantId": str(MERCHANT),
    "name": "Standard",
    "items": [
        {"name": "GST", "rate": "5.0000"},
        {"name": "QST", "rate": "9.975", "compound": True, "validFrom": "2020-01-01"},
    ],
}


@pytest.fixture(params=["jwt", "basic"])
def caller(request, admin, service_client):
    """Every route accepts both strategies (spec 5)."""
    return admin if request.param == "jwt" else service_client


def test_every_route_requires_authentication(client):
    for method, path in [
        ("get", f"{BASE}/tax-groups"),
        ("post", f"{BASE}/tax-groups"),
        ("get", f"{BASE}/tax-sets"),
        ("post", f"{BASE}/tax-provisioning/provision"),
        ("post", f"{BASE}/tax-provisioning/deprovision"),
        ("get", f"{BASE}/rounding-policies"),
        ("post", f"{BASE}/quotes"),
    ]:
        response = getattr(client, method)(path)
        assert response.status_code == 401, path
        assert response["Content-Type"] == "application/problem+json"
        assert "Bearer" in response["WWW-Authenticate"] or "Basic" in response["WWW-Authenticate"]


def test_a_tax_group_is_created_read_changed_listed_and_deleted(caller):
    created = caller.post(f"{BASE}/tax-groups", GROUP, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["merchantId"] == str(MERCHANT) and body["name"] == "Standard"
    assert [(i["name"], i["rate"], i["compound"], i["position"]) for i in body["items"]] == [
        ("GST", "5.0000", False, 0),
        ("QST", "9.9750", True, 1),
    ]
    assert body["items"][1]["validFrom"] == "2020-01-01" and body["items"][1]["validTo"] is None
    url = f"{BASE}/tax-groups/{body['id']}"
    assert caller.get(url).json() == body
    changed = caller.patch(url, {"name": "Reduced", "items": [{"name": "VAT", "rate": "7", "inclusive": True}]}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["name"] == "Reduced"
    assert [(i["name"], i["rate"], i["inclusive"]) for i in changed.json()["items"]] == [("VAT", "7.0000", True)]
    assert TaxItem.all_objects.filter(group_id=body["id"]).dead().count() == 2  # replaced softly
    listed = caller.get(f"{BASE}/tax-groups", {"merchantId": str(MERCHANT), "name": "reduc", "ordering": "-createdAt"})
    assert [g["id"] for g in listed.json()["results"]] == [body["id"]]
    assert caller.delete(url).status_code == 204
    assert caller.get(url).status_code == 404
    assert TaxGroup.all_objects.get(pk=body["id"]).deleted_at is not None


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([{"name": "VAT", "rate": "100.0001"}], "items.0.rate"),
        ([{"name": "VAT", "rate": "-1"}], "items.0.rate"),
        ([{"name": "VAT", "rate": "8.00001"}], "items.0.rate"),
        ([], "items"),
        ([{"name": "VAT", "rate": "8", "validFrom": "2024-02-01", "validTo": "2024-01-01"}], "items.0.validTo"),
        (
            [
                {"name": "VAT", "rate": "8", "validTo": "2024-12-31"},
                {"name": "VAT", "rate": "9", "validFrom": "2024-12-31"},
            ],
            "items.1.validFrom",
        ),
    ],
)
def test_bad_items_are_refused_naming_the_field_and_nothing_is_written(admin, items, field):
    before = TaxGroup.all_objects.count(), TaxItem.all_objects.count()
    response = admin.post(f"{BASE}/tax-groups", {**GROUP, "items": items}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert field in [error["field"] for error in response.json()["errors"]]
    assert (TaxGroup.all_objects.count(), TaxItem.all_objects.count()) == before


def test_consecutive_ranges_of_one_item_are_a_rate_change(admin):
    items = [{"name": "VAT", "rate": "8", "validTo": "2024-12-31"}, {"name": "VAT", "rate": "9", "validFrom": "2025-01-01"}]
    assert admin.post(f"{BASE}/tax-groups", {**GROUP, "items": items}, format="json").status_code == 201


def test_a_group_cannot_move_to_another_merchant(admin):
    group = admin.post(f"{BASE}/tax-groups", GROUP, format="json").json()
    response = admin.patch(f"{BASE}/tax-groups/{group['id']}", {"merchantId": str(OTHER_MERCHANT)}, format="json")
    assert response.status_code == 400
    assert TaxGroup.objects.get(pk=group["id"]).merchant_id == MERCHANT


def test_provisioning_creates_skips_replaces_and_deprovisioning_deactivates(caller, make_group):
    first, second = make_group(), make_group(item("VAT", "20"))
    learn_product(77)
    provision = f"{BASE}/tax-provisioning/provision"
    created = caller.post(provision, {"productId": "77", "taxGroupId": str(first.id)}, format="json")
    assert created.status_code == 200, created.json()
    body = created.json()
    assert body["outcome"] == "PROVISIONED" and body["deactivatedTaxSet"] is None
    assert body["taxSet"]["status"] == "ACTIVE" and body["taxSet"]["productId"] == "77"
    assert body["taxSet"]["taxGroupId"] == str(first.id) and body["taxSet"]["merchantId"] == str(MERCHANT)

    again = caller.post(provision, {"productId": 77, "taxGroupId": str(first.id)}, format="json").json()
    assert again["outcome"] == "ALREADY_PROVISIONED" and again["taxSet"]["id"] == body["taxSet"]["id"]

    replaced = caller.post(provision, {"productId": "77", "taxGroupId": str(second.id)}, format="json").json()
    assert replaced["outcome"] == "PROVISIONED"
    assert replaced["deactivatedTaxSet"]["id"] == body["taxSet"]["id"]
    assert replaced["deactivatedTaxSet"]["status"] == "DEACTIVATED" and replaced["deactivatedTaxSet"]["deactivatedAt"]
    assert TaxSet.objects.filter(product_id=77, status="ACTIVE").count() == 1

    deprovision = f"{BASE}/tax-provisioning/deprovision"
    done = caller.post(deprovision, {"productId": "77"}, format="json").json()
    assert done["outcome"] == "DEPROVISIONED" and done["taxSet"]["status"] == "DEACTIVATED"
    assert caller.post(deprovision, {"productId": "77"}, format="json").json() == {
        "outcome": "NOT_PROVISIONED",
        "taxSet": None,
        "deactivatedTaxSet": None,
    }
    history = caller.get(f"{BASE}/tax-sets", {"productId": "77", "ordering": "createdAt"}).json()["results"]
    assert [s["status"] for s in history] == ["DEACTIVATED", "DEACTIVATED"]


def test_provisioning_errors_are_stable_codes_logged_at_error_level(caller, make_group, caplog):
    caplog.set_level(logging.INFO)
    provision = f"{BASE}/tax-provisioning/provision"
    missing = caller.post(provision, {"productId": "78", "taxGroupId": "123456789"}, format="json")
    assert missing.status_code == 404
    assert missing["Content-Type"] == "application/problem+json"
    assert missing.json()["code"] == "TAX_GROUP_NOT_FOUND"
    assert missing.json()["errors"][0]["field"] == "taxGroupId"

    expired = make_group(item("VAT", "10", valid_to="2000-12-31"))
    learn_product(78)
    empty = caller.post(provision, {"productId": "78", "taxGroupId": str(expired.id)}, format="json")
    assert empty.status_code == 422
    assert empty.json()["code"] == "TAX_GROUP_HAS_NO_ITEMS"
    assert empty.json()["errors"][0]["field"] == "taxGroupId"
    assert not TaxSet.objects.filter(product_id=78).exists()

    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "taxation.provision" in r.getMessage()]
    assert len(errors) == 2, [r.getMessage() for r in caplog.records]

    bad = caller.post(provision, {"productId": "x", "taxGroupId": str(expired.id)}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "productId"


def test_another_merchants_group_is_not_found_and_its_sets_are_invisible(owner, make_group):
    theirs = make_group(merchant_id=OTHER_MERCHANT)
    learn_product(91)
    services.tax_set_provision(product_id=90, tax_group_id=theirs.id)
    response = owner.post(f"{BASE}/tax-provisioning/provision", {"productId": "91", "taxGroupId": str(theirs.id)}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "TAX_GROUP_NOT_FOUND"
    assert owner.get(f"{BASE}/tax-groups/{theirs.id}").status_code == 404
    assert owner.get(f"{BASE}/tax-sets").json()["results"] == []
    hidden = owner.post(f"{BASE}/tax-provisioning/deprovision", {"productId": "90"}, format="json").json()
    assert hidden["outcome"] == "NOT_PROVISIONED"
    assert TaxSet.objects.get(product_id=90).status == "ACTIVE"


def test_a_group_with_provisioned_products_cannot_be_deleted(admin, make_group):
    group = make_group()
    services.tax_set_provision(product_id=92, tax_group_id=group.id)
    response = admin.delete(f"{BASE}/tax-groups/{group.id}")
    assert response.status_code == 409 and response.json()["code"] == "TAX_GROUP_IN_USE"
    services.tax_set_deprovision(product_id=92)
    assert admin.delete(f"{BASE}/tax-groups/{group.id}").status_code == 204


def test_a_cashier_quotes_but_does_not_provision(make_caller, make_group):
    group = make_group()
    cashier = make_caller(roles=[("CASHIER", MERCHANT)], merchants=[MERCHANT]).client()
    response = cashier.post(f"{BASE}/tax-provisioning/provision", {"productId": "93", "taxGroupId": str(group.id)}, format="json")
    assert response.status_code in (403, 404)
    services.tax_set_provision(product_id=93, tax_group_id=group.id)
    quote = {"merchantId": str(MERCHANT), "currency": "USD", "lines": [{"productId": "93", "quantity": "1", "unitPrice": 1000}]}
    assert cashier.post(f"{BASE}/quotes", quote, format="json").status_code == 200


def test_rounding_policies_are_set_per_merchant(caller):
    url = f"{BASE}/rounding-policies"
    created = caller.post(url, {"merchantId": str(MERCHANT), "mode": "DOCUMENT"}, format="json")
    assert created.status_code == 200, created.json()
    again = caller.post(url, {"merchantId": str(MERCHANT), "mode": "LINE"}, format="json").json()
    assert again["id"] == created.json()["id"] and again["mode"] == "LINE"
    changed = caller.patch(f"{url}/{again['id']}", {"mode": "DOCUMENT"}, format="json")
    assert changed.json()["mode"] == "DOCUMENT"
    assert caller.patch(f"{url}/{again['id']}", {"merchantId": str(OTHER_MERCHANT)}, format="json").status_code == 400
    assert services.rounding_mode_of(MERCHANT) == "DOCUMENT"
    assert caller.delete(f"{url}/{again['id']}").status_code == 204
    assert services.rounding_mode_of(MERCHANT) == "LINE"


def test_tax_sets_and_quotes_answer_both_strategies(caller, make_group):
    group = make_group()
    learn_product(94)
    provisioned = caller.post(f"{BASE}/tax-provisioning/provision", {"productId": "94", "taxGroupId": str(group.id)}, format="json")
    tax_set = provisioned.json()["taxSet"]
    assert caller.get(f"{BASE}/tax-sets/{tax_set['id']}").json() == tax_set
    quote = {"merchantId": str(MERCHANT), "currency": "USD", "lines": [{"productId": "94", "quantity": "1", "unitPrice": 1000}]}
    answer = caller.post(f"{BASE}/quotes", quote, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["totals"] | {"taxes": None} == {"net": 1000, "tax": 100, "gross": 1100, "grossMajor": "11.00", "taxes": None}


def test_a_merchants_owner_runs_its_taxes_with_the_seeded_baseline(owner):
    group = owner.post(f"{BASE}/tax-groups", GROUP, format="json")
    assert group.status_code == 201, group.json()
    learn_product(95)
    provisioned = owner.post(f"{BASE}/tax-provisioning/provision", {"productId": "95", "taxGroupId": group.json()["id"]}, format="json")
    assert provisioned.json()["outcome"] == "PROVISIONED"
    quote = {"merchantId": str(MERCHANT), "currency": "CAD", "lines": [{"productId": "95", "quantity": "1", "unitPrice": 1000}]}
    assert owner.post(f"{BASE}/quotes", quote, format="json").json()["totals"]["tax"] == 155
    elsewhere = owner.post(f"{BASE}/tax-groups", {**GROUP, "merchantId": str(OTHER_MERCHANT)}, format="json")
    assert elsewhere.status_code == 403


def test_provisioning_needs_a_live_product_of_the_groups_merchant(make_caller, make_group):
    """The product must be one taxation learned from commerce (product stream or resync_tax), live,
    and of the tax group's merchant, which the caller may provision in; else 404 PRODUCT_NOT_FOUND
    naming productId, and nothing changes."""
    mine, theirs = make_group(), make_group(merchant_id=OTHER_MERCHANT)
    learn_product(700, OTHER_MERCHANT)
    learn_product(701)
    learn_product(702, live=False)
    provision = f"{BASE}/tax-provisioning/provision"
    owner = make_caller(roles=[("OWNER", MERCHANT)], merchants=[MERCHANT]).client()
    both = make_caller(roles=[("OWNER", MERCHANT), ("OWNER", OTHER_MERCHANT)], merchants=[MERCHANT, OTHER_MERCHANT]).client()
    admin = make_caller(roles=["ADMIN"]).client()
    for client, product, group in [
        (owner, 700, mine),  # another merchant's product with one's own group: the reported hole
        (owner, 703, mine),  # a product taxation never heard of
        (owner, 702, mine),  # a deleted product
        (both, 700, mine),  # a member of both merchants still cannot mix them
        (admin, 700, mine),
        (admin, 701, theirs),  # and the other way round: one's product with another merchant's group
    ]:
        response = client.post(provision, {"productId": str(product), "taxGroupId": str(group.id)}, format="json")
        assert response.status_code == 404, (product, response.json())
        assert response.json()["code"] in ("PRODUCT_NOT_FOUND", "TAX_GROUP_NOT_FOUND"), response.json()
        assert response.json()["errors"][0]["field"] in ("productId", "taxGroupId")
    assert not TaxSet.objects.filter(product_id__in=[700, 701, 702, 703]).exists()
    refused = owner.post(provision, {"productId": "700", "taxGroupId": str(mine.id)}, format="json").json()
    assert (refused["code"], refused["errors"][0]["field"]) == ("PRODUCT_NOT_FOUND", "productId")
    assert owner.post(provision, {"productId": "701", "taxGroupId": str(mine.id)}, format="json").json()["outcome"] == "PROVISIONED"
    assert both.post(provision, {"productId": "700", "taxGroupId": str(theirs.id)}, format="json").json()["outcome"] == "PROVISIONED"


def test_the_product_stream_teaches_taxation_each_products_merchant(make_group):
    group = make_group()
    services.product_apply(product_id=710, merchant_id=MERCHANT, tax_group_id=None)
    assert services.product_provision(product_id=710, tax_group_id=group.id, merchant_id=MERCHANT).outcome == "PROVISIONED"
    services.product_apply(product_id=711, merchant_id=MERCHANT, tax_group_id=group.id)  # provisioned by the stream, and known
    assert services.product_provision(product_id=711, tax_group_id=group.id, merchant_id=MERCHANT).outcome == "ALREADY_PROVISIONED"
    services.product_apply(product_id=710, merchant_id=MERCHANT, tax_group_id=group.id, live=False)  # deleted in commerce
    with pytest.raises(ApiError) as raised:
        services.product_provision(product_id=710, tax_group_id=group.id, merchant_id=MERCHANT)
    assert raised.value.code == "PRODUCT_NOT_FOUND"


def test_the_stream_quotes_and_rounding_policies_keep_merchants_apart(owner, make_group):
    """The same kind of hole elsewhere: a product change naming another merchant's group, or
    deleting a product of another merchant, is refused (FOREIGN_MERCHANT) and changes nothing; a quote does not use another
    merchant's tax set; a rounding policy of another merchant is neither set nor changed."""
    theirs = make_group(merchant_id=OTHER_MERCHANT)
    with pytest.raises(ApiError) as raised:
        services.product_apply(product_id=720, merchant_id=MERCHANT, tax_group_id=theirs.id)
    assert raised.value.code == "FOREIGN_MERCHANT"
    assert not TaxSet.objects.filter(product_id=720).exists() and not Product.all_objects.filter(product_id=720).exists()
    services.product_apply(product_id=721, merchant_id=OTHER_MERCHANT, tax_group_id=theirs.id)
    with pytest.raises(ApiError) as raised:
        services.product_apply(product_id=721, merchant_id=MERCHANT, tax_group_id=None, live=False)
    assert raised.value.code == "FOREIGN_MERCHANT"
    assert TaxSet.objects.get(product_id=721).status == "ACTIVE"
    assert Product.objects.filter(product_id=721).values_list("merchant_id", flat=True).get() == OTHER_MERCHANT
    quote = {"merchantId": str(MERCHANT), "currency": "EUR", "lines": [{"productId": "721", "quantity": "1", "unitPrice": 100}]}
    refused = owner.post(f"{BASE}/quotes", quote, format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "lines.0.productId"
    assert owner.post(f"{BASE}/quotes", {**quote, "merchantId": str(OTHER_MERCHANT)}, format="json").status_code in (403, 404)
    policy = services.rounding_policy_set(merchant_id=OTHER_MERCHANT, mode="DOCUMENT")
    url = f"{BASE}/rounding-policies"
    assert owner.post(url, {"merchantId": str(OTHER_MERCHANT), "mode": "LINE"}, format="json").status_code in (403, 404)
    assert owner.patch(f"{url}/{policy.id}", {"mode": "LINE"}, format="json").status_code == 404
    assert owner.delete(f"{url}/{policy.id}").status_code == 404
    assert services.rounding_mode_of(OTHER_MERCHANT) == "DOCUMENT"
