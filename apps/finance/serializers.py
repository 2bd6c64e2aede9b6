"""JSON shapes of finance: camelCase names, ids as strings, money as integer minor units beside an
ISO 4217 currency (docs/architecture.md section 10). Input serializers validate to the keyword arguments
of apps/finance/services/ (the snake_case of their names, or `source=`); output serializers only read."""

from __future__ import annotations

from django.core.validators import RegexValidator
from rest_framework import serializers

from apps.finance.models import Account, Voucher
from apps.finance.services import MANUAL_KINDS, MAX_LINES
from merchant_platform.money import MAX_AMOUNT
from merchant_platform.serializers import BaseSerializer, MoneyAmountField, SnowflakeField, StrictCharField, single_line

CURRENCY = RegexValidator(r"^[A-Z]{3}$", "Give an ISO 4217 currency code in capitals, such as EUR.")


class AmountField(MoneyAmountField):
    """Above MAX_AMOUNT the service answers 400 AMOUNT_TOO_LARGE (merchant_platform/money.py)."""

    def __init__(self, **kwargs):
        super().__init__(help_text=f"Minor units, at most {MAX_AMOUNT}.", **kwargs)


# --- Accounts -------------------------------------------------------------------------------------


class AccountSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    code = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    type = serializers.ChoiceField(choices=Account.Type.choices, read_only=True)
    currency = serializers.CharField(read_only=True)
    normalSide = serializers.ChoiceField(choices=Account.Side.choices, read_only=True)
    systemRole = serializers.CharField(read_only=True, help_text="INVENTORY, COGS, SALES... or empty.")
    balance = serializers.IntegerField(read_only=True, help_text="Minor units on the normal side; below zero is an overdraft.")
    postingSequence = serializers.IntegerField(read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class AccountUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.account_update."""

    name = StrictCharField(max_length=200, validators=[single_line])


class AccountCreateSerializer(AccountUpdateSerializer):
    """Validates to the keyword arguments of services.account_create."""

    merchantId = SnowflakeField()
    code = StrictCharField(max_length=32, validators=[RegexValidator(r"^[A-Za-z0-9_.-]+$", "Letters, digits, '_', '.' and '-' only.")])
    type = serializers.ChoiceField(choices=Account.Type.choices)
    currency = StrictCharField(max_length=3, validators=[CURRENCY])
    normalSide = serializers.ChoiceField(choices=Account.Side.choices, required=False)


class CountSerializer(BaseSerializer):
    count = serializers.IntegerField(read_only=True)


# --- Vouchers and lines ---------------------------------------------------------------------------


class LineSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    voucherId = SnowflakeField(read_only=True)
    lineNumber = serializers.IntegerField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    accountId = SnowflakeField(read_only=True)
    currency = serializers.CharField(read_only=True)
    debit = serializers.IntegerField(read_only=True)
    credit = serializers.IntegerField(read_only=True)
    postingSequence = serializers.IntegerField(read_only=True)
    balanceAfter = serializers.IntegerField(read_only=True)
    date = serializers.DateField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)


class VoucherSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    voucherId = SnowflakeField(source="id", read_only=True)
    voucherNumber = serializers.CharField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    fiscalYear = serializers.IntegerField(read_only=True)
    kind = serializers.ChoiceField(choices=Voucher.Kind.choices, read_only=True)
    reason = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=Voucher.Status.choices, read_only=True)
    voidable = serializers.BooleanField(read_only=True)
    date = serializers.DateField(read_only=True)
    memo = serializers.CharField(read_only=True)
    sourceType = serializers.CharField(read_only=True)
    sourceId = serializers.CharField(read_only=True)
    reversesId = SnowflakeField(read_only=True, allow_null=True)
    voidedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)


class VoucherDetailSerializer(VoucherSerializer):
    reversalId = serializers.SerializerMethodField()
    lines = LineSerializer(many=True, read_only=True)

    def get_reversalId(self, voucher) -> str | None:
        reversal = Voucher.all_objects.filter(reverses_id=voucher.id).values_list("id", flat=True).first()
        return None if reversal is None else str(reversal)


class LineInputSerializer(BaseSerializer):
    accountId = SnowflakeField()
    debit = AmountField(required=False, default=0)
    credit = AmountField(required=False, default=0)
    currency = StrictCharField(max_length=3, validators=[CURRENCY], required=False, help_text="Must be the account's currency.")


class VoucherCreateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.voucher_post."""

    merchantId = SnowflakeField()
    kind = serializers.ChoiceField(choices=[(k.value, k.label) for k in MANUAL_KINDS])
    reason = serializers.ChoiceField(choices=Voucher.Reason.choices, required=False, help_text="ADJUSTMENT only.")
    date = serializers.DateField(required=False, help_text="Defaults to today; its year numbers the voucher.")
    memo = StrictCharField(max_length=500, validators=[single_line], required=False, allow_blank=True)
    lines = LineInputSerializer(many=True, allow_empty=False, max_length=MAX_LINES)


class VoidSerializer(BaseSerializer):
    memo = StrictCharField(max_length=500, validators=[single_line], required=False, allow_blank=True)


# --- Reports --------------------------------------------------------------------------------------


class TrialBalanceQuerySerializer(BaseSerializer):
    merchantId = SnowflakeField()
    asOf = serializers.DateField(required=False)


class TrialBalanceRowSerializer(BaseSerializer):
    account = AccountSerializer(read_only=True)
    debit = serializers.IntegerField(read_only=True)
    credit = serializers.IntegerField(read_only=True)
    balance = serializers.IntegerField(read_only=True)


class CurrencyTotalSerializer(BaseSerializer):
    currency = serializers.CharField(read_only=True)
    debit = serializers.IntegerField(read_only=True)
    credit = serializers.IntegerField(read_only=True)


class TrialBalanceSerializer(BaseSerializer):
    merchantId = SnowflakeField(read_only=True)
    asOf = serializers.DateField(read_only=True)
    accounts = TrialBalanceRowSerializer(many=True, read_only=True)
    totals = CurrencyTotalSerializer(many=True, read_only=True)


class PeriodQuerySerializer(BaseSerializer):
    dateFrom = serializers.DateField()
    dateTo = serializers.DateField()

    def validate(self, attrs):
        if attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"dateTo": "Give a date on or after dateFrom."})
        return attrs


class StatementEntrySerializer(BaseSerializer):
    line = LineSerializer(read_only=True)
    voucherNumber = serializers.CharField(source="line.voucher.voucher_number", read_only=True)
    kind = serializers.CharField(source="line.voucher.kind", read_only=True)
    memo = serializers.CharField(source="line.voucher.memo", read_only=True)
    runningBalance = serializers.IntegerField(read_only=True)


class StatementHeadSerializer(BaseSerializer):
    """What a statement's response starts with; its entries and closing balance follow as they stream."""

    account = AccountSerializer(read_only=True)
    dateFrom = serializers.DateField(read_only=True)
    dateTo = serializers.DateField(read_only=True)
    openingBalance = serializers.IntegerField(source="opening", read_only=True)


class StatementSerializer(StatementHeadSerializer):
    """The whole response (the schema); the view streams it as StatementHeadSerializer, the entries
    chunk by chunk, then closingBalance."""

    entries = StatementEntrySerializer(many=True, read_only=True)
    closingBalance = serializers.IntegerField(source="closing", read_only=True)


class GeneralLedgerQuerySerializer(PeriodQuerySerializer):
    merchantId = SnowflakeField()
    cursor = StrictCharField(
        max_length=64,
        required=False,
        validators=[RegexValidator(r"^\d{4}-\d{2}-\d{2}_\d{1,19}$", "Give the nextCursor of the previous page.")],
    )
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=500)


class GeneralLedgerEntrySerializer(BaseSerializer):
    """One posted line, as the ledger service renders it (docs/services/finance.md, the JSON schema)."""

    lineId = SnowflakeField(source="id", read_only=True)
    date = serializers.DateField(read_only=True)
    voucherId = SnowflakeField(read_only=True)
    voucherNumber = serializers.CharField(source="voucher.voucher_number", read_only=True)
    kind = serializers.CharField(source="voucher.kind", read_only=True)
    reason = serializers.CharField(source="voucher.reason", read_only=True)
    voucherStatus = serializers.CharField(source="voucher.status", read_only=True)
    memo = serializers.CharField(source="voucher.memo", read_only=True)
    reversesId = SnowflakeField(source="voucher.reverses_id", read_only=True, allow_null=True)
    lineNumber = serializers.IntegerField(read_only=True)
    accountId = SnowflakeField(read_only=True)
    accountCode = serializers.CharField(source="account.code", read_only=True)
    accountName = serializers.CharField(source="account.name", read_only=True)
    accountType = serializers.CharField(source="account.type", read_only=True)
    currency = serializers.CharField(read_only=True)
    debit = serializers.IntegerField(read_only=True)
    credit = serializers.IntegerField(read_only=True)


class GeneralLedgerPageSerializer(BaseSerializer):
    merchantId = SnowflakeField(read_only=True)
    dateFrom = serializers.DateField(read_only=True)
    dateTo = serializers.DateField(read_only=True)
    entries = GeneralLedgerEntrySerializer(many=True, read_only=True)
    nextCursor = serializers.CharField(read_only=True, allow_null=True)
