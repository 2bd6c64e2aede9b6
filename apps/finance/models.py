"""Finance records: per-merchant double-entry books (spec 2.1).

- `Account`: one account of a merchant's chart, in one currency, with its `balance` (on its normal
  side: debits minus credits for a debit-normal account, the reverse for a credit-normal one) and
  `posting_sequence`, the number of lines ever posted to it. Both change only when a voucher is
  posted, in the same transaction as its lines.
- `Voucher`: one posted document (`voucher_number` gapless per merchant and fiscal year). Its
  lines (`FinanceTransaction`) are immutable: a database trigger refuses every UPDATE and DELETE of
  the table (migration 0002), so a posting is corrected by a new voucher, never edited.
- `VoucherCounter`: the last number issued per merchant and year; taken with the voucher's
  transaction, so a rolled-back posting gives its number back and numbers have no gap.
- `IdempotencyKey`: the REST `Idempotency-Key` records (docs/architecture.md section 10).
- `OutboxMessage`: the events finance publishes, written in the transaction of the change they
  announce (docs/events.md); `ProcessedMessage`: the broker messages its consumers handled.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from merchant_platform.idempotency import IdempotencyKeyBase
from merchant_platform.messaging.models import OutboxMessageBase, ProcessedMessageBase
from merchant_platform.models import BaseModel, OwnedModel
from merchant_platform.money import MAX_AMOUNT, MAX_BALANCE


class Account(OwnedModel):
    class Type(models.TextChoices):
        ASSET = "ASSET"
        LIABILITY = "LIABILITY"
        EQUITY = "EQUITY"
        INCOME = "INCOME"
        EXPENSE = "EXPENSE"

    class Side(models.TextChoices):
        DEBIT = "DEBIT"
        CREDIT = "CREDIT"

    merchant_id = models.BigIntegerField()  # commerce's merchant (the tenant)
    code = models.CharField(max_length=32)
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=16, choices=Type.choices)
    currency = models.CharField(max_length=3)  # ISO 4217
    normal_side = models.CharField(max_length=6, choices=Side.choices)
    # The role of an account the platform posts to by itself (INVENTORY, COGS, SALES...), or "".
    system_role = models.CharField(max_length=32, blank=True, default="")
    balance = models.BigIntegerField(default=0)  # minor units, on the normal side, within +-MAX_BALANCE
    posting_sequence = models.BigIntegerField(default=0)  # lines posted so far; the last line's number

    class Meta(OwnedModel.Meta):
        ordering = ("merchant_id", "currency", "code")
        constraints = [
            models.UniqueConstraint(fields=["merchant_id", "currency", "code"], name="finance_account_code_unique"),
            models.UniqueConstraint(
                fields=["merchant_id", "currency", "system_role"], condition=~Q(system_role=""), name="finance_account_role_unique"
            ),
            models.CheckConstraint(condition=Q(posting_sequence__gte=0), name="finance_account_sequence_not_negative"),
            models.CheckConstraint(
                condition=Q(balance__gte=-MAX_BALANCE) & Q(balance__lte=MAX_BALANCE), name="finance_account_balance_within_max"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.name} ({self.currency})"


class Voucher(OwnedModel):
    class Kind(models.TextChoices):
        SALE = "SALE"
        PAYMENT = "PAYMENT"
        ADJUSTMENT = "ADJUSTMENT"
        COGS = "COGS"
        INVENTORY_ADJUSTMENT = "INVENTORY_ADJUSTMENT"
        REVERSAL = "REVERSAL"
        REFUND = "REFUND"  # a refund paid back (payment.refunded): the SALE posting reversed for its amount
        COGS_RETURN = "COGS_RETURN", "COGS return"  # a refund's restocked goods (inventory.returned): COGS back to INVENTORY

    class Reason(models.TextChoices):
        CORRECTION = "correction"
        CASH_COUNT = "cash_count"

    class Status(models.TextChoices):
        ISSUED = "issued"
        VOIDED = "voided"

    merchant_id = models.BigIntegerField()
    fiscal_year = models.PositiveIntegerField()
    number = models.PositiveIntegerField()  # gapless per merchant and fiscal year, from 1
    voucher_number = models.CharField(max_length=32)  # "<year>-<number:06d>"
    kind = models.CharField(max_length=24, choices=Kind.choices)
    reason = models.CharField(max_length=16, choices=Reason.choices, blank=True, default="")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ISSUED)
    date = models.DateField()
    memo = models.CharField(max_length=500, blank=True, default="")
    # Where it comes from: ("payment-attempt", attempt id), ("inventory-cogs", "<order id>/<currency>")... A source
    # posts one voucher: a replayed event finds it (spec 6.2).
    source_type = models.CharField(max_length=32, blank=True, default="")
    source_id = models.CharField(max_length=128, blank=True, default="")
    reverses = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT, related_name="reversal")
    voided_at = models.DateTimeField(null=True, blank=True)

    class Meta(OwnedModel.Meta):
        ordering = ("-fiscal_year", "-number")
        constraints = [
            models.UniqueConstraint(fields=["merchant_id", "fiscal_year", "number"], name="finance_voucher_number_unique"),
            models.UniqueConstraint(
                fields=["merchant_id", "source_type", "source_id"], condition=~Q(source_id=""), name="finance_voucher_source_unique"
            ),
        ]
        indexes = [models.Index(fields=["merchant_id", "date"], name="finance_voucher_merchant_date")]

    def __str__(self) -> str:
        return f"{self.voucher_number} {self.kind}"

    @property
    def voidable(self) -> bool:
        return self.status == self.Status.ISSUED and self.kind in VOIDABLE_KINDS


VOIDABLE_KINDS = frozenset({Voucher.Kind.SALE, Voucher.Kind.PAYMENT, Voucher.Kind.ADJUSTMENT})


class FinanceTransaction(BaseModel):
    """One line of a voucher (spec 2.1 FinanceTransaction): a debit or a credit to one account.
    Immutable once written (database trigger). `posting_sequence` is the account's sequence number
    this line took and `balance_after` the account's balance after it."""

    voucher = models.ForeignKey(Voucher, on_delete=models.PROTECT, related_name="lines", db_column="finance_voucher_id")
    line_number = models.PositiveIntegerField()
    merchant_id = models.BigIntegerField()
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="lines")
    currency = models.CharField(max_length=3)
    debit = models.BigIntegerField(default=0)
    credit = models.BigIntegerField(default=0)
    posting_sequence = models.BigIntegerField()
    balance_after = models.BigIntegerField()
    date = models.DateField()  # the voucher's date, repeated for statements and reports

    class Meta(BaseModel.Meta):
        db_table = "finance_transaction"
        ordering = ("voucher_id", "line_number")
        constraints = [
            models.UniqueConstraint(fields=["voucher", "line_number"], name="finance_line_number_unique"),
            models.UniqueConstraint(fields=["account", "posting_sequence"], name="finance_line_sequence_unique"),
            models.CheckConstraint(
                condition=(Q(debit__gt=0) & Q(credit=0)) | (Q(debit=0) & Q(credit__gt=0)), name="finance_line_one_side_positive"
            ),
            models.CheckConstraint(condition=Q(debit__lte=MAX_AMOUNT) & Q(credit__lte=MAX_AMOUNT), name="finance_line_amount_within_max"),
            models.CheckConstraint(
                condition=Q(balance_after__gte=-MAX_BALANCE) & Q(balance_after__lte=MAX_BALANCE), name="finance_line_balance_within_max"
            ),
        ]
        indexes = [
            models.Index(fields=["merchant_id", "date", "id"], name="finance_line_merchant_date"),
            models.Index(fields=["account", "date", "posting_sequence"], name="finance_line_account_date"),
        ]

    def __str__(self) -> str:
        return f"{self.voucher_id}#{self.line_number}"


class VoucherCounter(models.Model):
    """Last voucher number issued per merchant and fiscal year (taken with the posting's transaction)."""

    id = models.BigAutoField(primary_key=True)
    merchant_id = models.BigIntegerField()
    fiscal_year = models.PositiveIntegerField()
    last_number = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "finance_voucher_counter"
        constraints = [models.UniqueConstraint(fields=["merchant_id", "fiscal_year"], name="finance_counter_unique")]

    def __str__(self) -> str:
        return f"{self.merchant_id}/{self.fiscal_year}: {self.last_number}"


class IdempotencyKey(IdempotencyKeyBase):
    """A REST `Idempotency-Key` of a voucher POST (merchant_platform/idempotency.py)."""

    class Meta(IdempotencyKeyBase.Meta):
        db_table = "finance_idempotency_key"


class ProcessedMessage(ProcessedMessageBase):
    """Broker messages the finance consumers handled (docs/events.md, idempotency)."""


class OutboxMessage(OutboxMessageBase):
    """Events finance publishes (voucher.posted, voucher.voided on finance.vouchers): sent once the
    posting or void they announce commits."""
