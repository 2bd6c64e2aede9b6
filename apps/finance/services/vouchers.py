"""Voids and corrections: a posted voucher never changes; a void posts its REVERSAL, a correction
an ADJUSTMENT with its lines on the other side (spec 3.2)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.finance.models import VOIDABLE_KINDS, FinanceTransaction, Voucher
from apps.finance.services.accounts import DB, Kind
from apps.finance.services.posting import voucher_post
from apps.finance.services.voucher_events import VOUCHER_VOIDED, vouchers_announce
from merchant_platform.errors import Conflict, NotFound


def voucher_void(*, voucher_id: int, memo: str = "", created_by: int | None = None) -> Voucher:
    """Void an issued, voidable voucher (SALE, PAYMENT, ADJUSTMENT): post a balanced REVERSAL
    voucher with every line on the other side, referencing it, and mark it voided (spec 3.2).
    COGS and INVENTORY_ADJUSTMENT are corrected by a new ADJUSTMENT voucher instead. Publishes the
    reversal's voucher.posted, then the voided voucher's voucher.voided, in the void's transaction.
    Returns the voided voucher (its reversal is `voucher.reversal`)."""
    with transaction.atomic(using=DB):
        voucher = Voucher.objects.select_for_update().filter(pk=voucher_id).first()
        if voucher is None:
            raise NotFound("No voucher has this id.")
        if voucher.status == Voucher.Status.VOIDED:
            raise Conflict("The voucher is already voided.", code="VOUCHER_ALREADY_VOIDED")
        if voucher.kind not in VOIDABLE_KINDS:
            raise Conflict(
                f"A {voucher.kind} voucher is not voidable; post an ADJUSTMENT voucher to correct it.", code="VOUCHER_NOT_VOIDABLE"
            )
        posted_lines = list(FinanceTransaction.objects.filter(voucher_id=voucher.id).order_by("line_number"))
        voucher_post(
            merchant_id=voucher.merchant_id,
            kind=Kind.REVERSAL,
            lines=[{"account_id": line.account_id, "debit": line.credit, "credit": line.debit} for line in posted_lines],
            memo=memo or f"Reversal of {voucher.voucher_number}",
            reverses_id=voucher.id,
            created_by=created_by,
        )
        voucher.status = Voucher.Status.VOIDED
        voucher.voided_at = timezone.now()
        voucher.save(using=DB, update_fields=["status", "voided_at", "updated_at"])
        vouchers_announce(VOUCHER_VOIDED, [(voucher, posted_lines)])
    return voucher


def voucher_correct(*, voucher_id: int, memo: str = "", created_by: int | None = None) -> Voucher:
    """Correct a voucher that is not voidable (COGS, INVENTORY_ADJUSTMENT, REFUND, COGS_RETURN): post an ADJUSTMENT
    (reason `correction`) with its lines on the other side, once per voucher (a second call returns
    the first correction). The corrected voucher stays issued: both stay in the books (spec 3.2)."""
    voucher = Voucher.objects.filter(pk=voucher_id).first()
    if voucher is None:
        raise NotFound("No voucher has this id.")
    if voucher.kind not in (Kind.COGS, Kind.INVENTORY_ADJUSTMENT, Kind.REFUND, Kind.COGS_RETURN):
        raise Conflict(f"A {voucher.kind} voucher is corrected by a void.", code="VOUCHER_VOIDABLE")
    lines = [
        {"account_id": line.account_id, "debit": line.credit, "credit": line.debit}
        for line in FinanceTransaction.objects.filter(voucher_id=voucher.id).order_by("line_number")
    ]
    return voucher_post(
        merchant_id=voucher.merchant_id,
        kind=Kind.ADJUSTMENT,
        reason=Voucher.Reason.CORRECTION,
        lines=lines,
        memo=memo or f"Correction of {voucher.voucher_number}",
        source_type="correction",
        source_id=str(voucher.id),
        created_by=created_by,
    )
