"""JSON shapes of taxation (camelCase, ids as strings, amounts as integers of minor units, rates as
decimal strings with four places)."""

from __future__ import annotations

from decimal import Decimal

from rest_framework import serializers

from apps.taxation import services
from apps.taxation.currencies import MINOR_DIGITS, major, minor_digits
from apps.taxation.models import RATE_DIGITS, RATE_PLACES, RoundingPolicy, TaxGroup, TaxItem, TaxSet
from merchant_platform.serializers import BaseModelSerializer, BaseSerializer, SnowflakeField, StrictCharField, single_line

MAX_MINOR_AMOUNT = 10**15
QUANTITY_DIGITS, QUANTITY_PLACES = 14, 4


def rate_field(**kwargs) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=RATE_DIGITS, decimal_places=RATE_PLACES, min_value=Decimal(0), max_value=Decimal(100), **kwargs
    )


class TaxItemSerializer(BaseModelSerializer):
    """One rate of a group. `rate` is a percentage (0-100, at most 4 decimal places); the group's
    items apply in the order given."""

    name = StrictCharField(max_length=120, validators=[single_line])
    rate = rate_field(help_text='Percent, e.g. "8.0000".')
    inclusive = serializers.BooleanField(required=False, default=False, help_text="The price already contains this tax.")
    compound = serializers.BooleanField(
        required=False, default=False, help_text="Computed on the net plus the taxes of every earlier item."
    )
    validFrom = serializers.DateField(required=False, allow_null=True, help_text="First day in effect.")
    validTo = serializers.DateField(required=False, allow_null=True, help_text="Last day in effect (inclusive).")

    class Meta:
        model = TaxItem
        fields = ("id", "name", "rate", "inclusive", "compound", "validFrom", "validTo", "position")
        read_only_fields = ("position",)


def items_field(**kwargs) -> TaxItemSerializer:
    return TaxItemSerializer(many=True, min_length=1, max_length=services.MAX_ITEMS_PER_GROUP, **kwargs)


class TaxGroupSerializer(BaseModelSerializer):
    """A tax group of a merchant with its items (spec 2.1)."""

    merchantId = SnowflakeField()
    name = StrictCharField(max_length=120, validators=[single_line])
    description = StrictCharField(max_length=500, required=False, default="", allow_blank=True, validators=[single_line])
    items = items_field()
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = TaxGroup
        fields = ("id", "merchantId", "name", "description", "items", "createdBy", "createdAt", "updatedAt")


class TaxGroupUpdateSerializer(TaxGroupSerializer):
    """A group keeps its merchant; `items`, when given, replaces every item."""

    merchantId = SnowflakeField(read_only=True)
    name = StrictCharField(max_length=120, required=False, validators=[single_line])
    description = StrictCharField(max_length=500, required=False, allow_blank=True, validators=[single_line])
    items = items_field(required=False)


class TaxSetSerializer(BaseModelSerializer):
    """A product's binding to a tax group; read-only (provisioning writes them)."""

    merchantId = SnowflakeField(read_only=True)
    productId = SnowflakeField(read_only=True)
    taxGroupId = SnowflakeField(source="group_id", read_only=True)
    status = serializers.ChoiceField(choices=TaxSet.Status.choices, read_only=True)
    source = serializers.CharField(read_only=True, help_text="What provisioned it: api, stream or admin.")
    deactivatedAt = serializers.DateTimeField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = TaxSet
        fields = ("id", "merchantId", "productId", "taxGroupId", "status", "source", "deactivatedAt", "createdAt", "updatedAt")


class ProvisionSerializer(BaseSerializer):
    productId = SnowflakeField()
    taxGroupId = SnowflakeField()


class DeprovisionSerializer(BaseSerializer):
    productId = SnowflakeField()


class ProvisioningSerializer(BaseSerializer):
    """What provisioning did. provision: PROVISIONED (a new active set; `deactivatedTaxSet` is the one
    it replaced, if any) or ALREADY_PROVISIONED (skipped, spec 3.2: `taxSet` is the active set).
    deprovision: DEPROVISIONED (`taxSet` is the set now DEACTIVATED) or NOT_PROVISIONED (nothing to do)."""

    outcome = serializers.ChoiceField(
        choices=[services.PROVISIONED, services.ALREADY_PROVISIONED, services.DEPROVISIONED, services.NOT_PROVISIONED]
    )
    taxSet = TaxSetSerializer(allow_null=True)
    deactivatedTaxSet = TaxSetSerializer(source="deactivated", allow_null=True, required=False)


class RoundingPolicySerializer(BaseModelSerializer):
    """How a merchant's quotes round: LINE (default) or DOCUMENT. Creating one for a merchant that
    has one changes it."""

    merchantId = SnowflakeField()
    mode = serializers.ChoiceField(choices=RoundingPolicy.Mode.choices)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = RoundingPolicy
        fields = ("id", "merchantId", "mode", "createdAt", "updatedAt")


class RoundingPolicyUpdateSerializer(RoundingPolicySerializer):
    merchantId = SnowflakeField(read_only=True)


# --- Quotes ---------------------------------------------------------------------------------------


class QuoteLineInput(BaseSerializer):
    productId = SnowflakeField()
    quantity = serializers.DecimalField(
        max_digits=QUANTITY_DIGITS, decimal_places=QUANTITY_PLACES, min_value=Decimal("0.0001"), help_text="More than 0."
    )
    unitPrice = serializers.IntegerField(min_value=0, max_value=MAX_MINOR_AMOUNT, help_text="Minor units.")
    discount = serializers.IntegerField(
        min_value=0, max_value=MAX_MINOR_AMOUNT, required=False, default=0, help_text="Minor units off the line's quantity x unit price."
    )


class QuoteRequestSerializer(BaseSerializer):
    merchantId = SnowflakeField()
    currency = serializers.ChoiceField(choices=sorted(MINOR_DIGITS), help_text="ISO 4217 code.")
    date = serializers.DateField(required=False, help_text="The day whose rates apply (default today, UTC).")
    lines = QuoteLineInput(many=True, min_length=1, max_length=services.MAX_QUOTE_LINES)


class QuoteTaxSerializer(BaseSerializer):
    snake_case_sources = False

    taxItemId = SnowflakeField()
    name = serializers.CharField()
    rate = serializers.DecimalField(max_digits=RATE_DIGITS, decimal_places=RATE_PLACES)
    inclusive = serializers.BooleanField()
    compound = serializers.BooleanField()
    amount = serializers.IntegerField(help_text="Minor units.")


class QuoteLineSerializer(BaseSerializer):
    snake_case_sources = False

    productId = SnowflakeField()
    quantity = serializers.DecimalField(max_digits=QUANTITY_DIGITS, decimal_places=QUANTITY_PLACES)
    unitPrice = serializers.IntegerField()
    discount = serializers.IntegerField()
    taxSetId = SnowflakeField()
    taxGroupId = SnowflakeField()
    amount = serializers.IntegerField(help_text="Quantity x unit price - discount, rounded: what the price says.")
    net = serializers.IntegerField(help_text="Without any tax.")
    tax = serializers.IntegerField()
    gross = serializers.IntegerField(help_text="net + tax.")
    taxes = QuoteTaxSerializer(many=True)


class QuoteTotalsSerializer(BaseSerializer):
    snake_case_sources = False

    net = serializers.IntegerField()
    tax = serializers.IntegerField()
    gross = serializers.IntegerField()
    grossMajor = serializers.CharField(help_text='gross in major units, exactly (e.g. "12.34").')
    taxes = QuoteTaxSerializer(many=True, help_text="Each tax item summed over the lines.")


class QuoteSerializer(BaseSerializer):
    """Amounts are integers of the currency's minor units; net + tax = gross on every line and in
    the totals (docs/services/taxation.md, rounding)."""

    snake_case_sources = False

    merchantId = SnowflakeField()
    currency = serializers.CharField()
    minorDigits = serializers.IntegerField()
    date = serializers.DateField()
    rounding = serializers.ChoiceField(choices=RoundingPolicy.Mode.choices)
    lines = QuoteLineSerializer(many=True)
    totals = QuoteTotalsSerializer()


def _tax(rate, amount: int) -> dict:
    return {
        "taxItemId": str(rate.item_id),
        "name": rate.name,
        "rate": f"{rate.rate:.{RATE_PLACES}f}",
        "inclusive": rate.inclusive,
        "compound": rate.compound,
        "amount": amount,
    }


def quote_representation(quote: services.Quote) -> dict:
    """The QuoteSerializer shape of a computed quote."""
    lines, rates = [], {}
    for line, result in zip(quote.lines, quote.tax.lines, strict=True):
        lines.append(
            {
                "productId": str(line.product_id),
                "quantity": f"{line.quantity:.{QUANTITY_PLACES}f}",
                "unitPrice": line.unit_price,
                "discount": line.discount,
                "taxSetId": str(line.tax_set.id),
                "taxGroupId": str(line.tax_set.group_id),
                "amount": result.priced,
                "net": result.net,
                "tax": result.tax,
                "gross": result.gross,
                "taxes": [_tax(item.rate, item.amount) for item in result.items],
            }
        )
        rates.update((item.rate.item_id, item.rate) for item in result.items)
    return {
        "merchantId": str(quote.merchant_id),
        "currency": quote.currency,
        "minorDigits": minor_digits(quote.currency),
        "date": quote.date.isoformat(),
        "rounding": quote.tax.rounding,
        "lines": lines,
        "totals": {
            "net": quote.tax.net,
            "tax": quote.tax.tax,
            "gross": quote.tax.gross,
            "grossMajor": major(quote.tax.gross, quote.currency),
            "taxes": [_tax(rates[item_id], amount) for item_id, amount in quote.tax.by_item.items()],
        },
    }
