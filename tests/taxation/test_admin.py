"""The Django admin (all-in-one topology): tax groups with their items inline, read-only; tax sets as
a read-only status history; changes through the services."""

from __future__ import annotations

import pytest

from apps.taxation import services
from apps.taxation.models import RoundingPolicy, TaxGroup, TaxSet
from tests.taxation.conftest import MERCHANT, item

pytestmark = pytest.mark.django_db(databases="__all__")


def test_a_group_shows_its_items_inline_read_only(admin_client, make_group):
    group = make_group(item("GST", "5"), item("QST", "9.975", compound=True))
    assert admin_client.get("/admin/taxation/taxgroup/").status_code == 200
    page = admin_client.get(f"/admin/taxation/taxgroup/{group.id}/change/")
    assert page.status_code == 200
    assert b"QST" in page.content and b"9.9750" in page.content
    assert b'name="name"' not in page.content and b'name="items-0-rate"' not in page.content  # nothing editable
    assert admin_client.get("/admin/taxation/taxgroup/add/").status_code == 403


def test_tax_sets_are_a_read_only_history_and_deprovision_goes_through_the_service(admin_client, make_group):
    first, second = make_group(), make_group(item("VAT", "20"))
    services.tax_set_provision(product_id=501, tax_group_id=first.id)
    services.tax_set_provision(product_id=501, tax_group_id=second.id)
    listing = admin_client.get("/admin/taxation/taxset/", {"product_id": 501})
    assert listing.status_code == 200 and b"DEACTIVATED" in listing.content and b"ACTIVE" in listing.content
    active = TaxSet.objects.get(product_id=501, status=TaxSet.Status.ACTIVE)
    assert admin_client.get(f"/admin/taxation/taxset/{active.id}/delete/").status_code == 403

    response = admin_client.post("/admin/taxation/taxset/", {"action": "deprovision", "_selected_action": [active.id]})
    assert response.status_code == 302
    active.refresh_from_db()
    assert active.status == TaxSet.Status.DEACTIVATED and active.deactivated_at


def test_deleting_a_group_in_use_is_refused_and_reported(admin_client, make_group):
    used, unused = make_group(), make_group()
    services.tax_set_provision(product_id=502, tax_group_id=used.id)
    admin_client.post("/admin/taxation/taxgroup/", {"action": "delete_selected", "_selected_action": [used.id, unused.id], "post": "yes"})
    assert TaxGroup.objects.filter(pk=used.id).exists()
    assert not TaxGroup.objects.filter(pk=unused.id).exists()
    assert TaxGroup.all_objects.get(pk=unused.id).deleted_at is not None


def test_rounding_actions(admin_client):
    policy = services.rounding_policy_set(merchant_id=MERCHANT, mode="LINE")
    admin_client.post("/admin/taxation/roundingpolicy/", {"action": "round_per_document", "_selected_action": [policy.id]})
    assert RoundingPolicy.objects.get(pk=policy.id).mode == "DOCUMENT"
