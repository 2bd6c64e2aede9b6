"""The Django admin cannot unbalance the books: no add, edit or delete of accounts, vouchers or
lines; the void action goes through services.voucher_void (reversal posted, COGS refused)."""

from __future__ import annotations

import pytest

from apps.finance import services
from apps.finance.models import Account, Voucher
from tests.finance.conftest import books, invariant_violations, post

pytestmark = pytest.mark.django_db(databases="__all__")


def test_books_are_read_only_in_the_admin(admin_client):
    chart = books()
    voucher = post(chart["CASH"], chart["SALES"], 100)
    line = voucher.lines.first()
    for model, pk in (("account", chart["CASH"].pk), ("voucher", voucher.pk), ("financetransaction", line.pk)):
        assert admin_client.get(f"/admin/finance/{model}/{pk}/change/").status_code == 200
        assert admin_client.get(f"/admin/finance/{model}/add/").status_code == 403
        assert admin_client.post(f"/admin/finance/{model}/{pk}/change/", {"balance": 5, "debit": 5, "status": "voided"}).status_code == 403
        assert admin_client.post(f"/admin/finance/{model}/{pk}/delete/", {"post": "yes"}).status_code == 403
    assert Account.objects.get(pk=chart["CASH"].pk).balance == 100
    assert Voucher.objects.get(pk=voucher.pk).status == "issued"


def test_the_void_action_posts_the_reversal_and_refuses_inventory_vouchers(admin_client):
    chart = books()
    sale = post(chart["CASH"], chart["SALES"], 100)
    cogs = services.cogs_post(merchant_id=chart["COGS"].merchant_id, order_id="o-1", currency="EUR", amount=40)
    response = admin_client.post("/admin/finance/voucher/", {"action": "void", "_selected_action": [sale.pk, cogs.pk]}, follow=True)
    assert response.status_code == 200
    assert "not voidable" in response.content.decode()
    assert Voucher.objects.get(pk=sale.pk).status == "voided"
    assert Voucher.objects.get(reverses_id=sale.pk).kind == "REVERSAL"
    assert Voucher.objects.get(pk=cogs.pk).status == "issued"
    assert Account.objects.get(pk=chart["CASH"].pk).balance == 0
    assert invariant_violations([chart["CASH"].merchant_id]) == []


def test_the_correct_action_posts_one_reversing_adjustment_for_inventory_vouchers(admin_client):
    chart = books()
    cogs = services.cogs_post(merchant_id=chart["COGS"].merchant_id, order_id="o-1", currency="EUR", amount=40)
    sale = post(chart["CASH"], chart["SALES"], 100)
    for _ in range(2):  # twice: still one correction
        admin_client.post("/admin/finance/voucher/", {"action": "correct", "_selected_action": [cogs.pk, sale.pk]}, follow=True)
    (correction,) = Voucher.objects.filter(kind="ADJUSTMENT", merchant_id=chart["COGS"].merchant_id)
    assert (correction.reason, correction.source_id) == ("correction", str(cogs.pk))
    assert [(line.account_id, line.debit, line.credit) for line in correction.lines.order_by("line_number")] == [
        (chart["COGS"].id, 0, 40),
        (chart["INVENTORY"].id, 40, 0),
    ]
    assert Account.objects.get(pk=chart["COGS"].pk).balance == 0
    assert Voucher.objects.get(pk=cogs.pk).status == "issued" and Voucher.objects.get(pk=sale.pk).status == "issued"
