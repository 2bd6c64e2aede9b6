"""JSON shapes of commerce: camelCase names, ids as strings, money as integer minor units beside an
ISO 4217 currency (docs/architecture.md section 10). Input serializers validate to the keyword arguments
of apps/commerce/services.py (the snake_case of their names, or `source=`); output serializers only read."""

from __future__ import annotations

import zoneinfo
from functools import lru_cache

from django.core.validators import RegexValidator
from rest_framework import serializers

from apps.commerce import storage
from apps.commerce.codes import COUNTRIES, CURRENCIES
from apps.commerce.models import ATTRIBUTES_MAX_BYTES, Merchant, Product, ProductVariant
from apps.commerce.services import amount_too_large, check_attributes
from merchant_platform.errors import InvalidInput
from merchant_platform.models import Configuration
from merchant_platform.money import MAX_AMOUNT
from merchant_platform.serializers import BaseSerializer, CodeField, MoneyAmountField, SnowflakeField, StrictCharField, single_line


@lru_cache(maxsize=1)
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _name(max_length: int = 200, **kwargs) -> StrictCharField:
    return StrictCharField(max_length=max_length, validators=[single_line], **kwargs)


def currency_field(**kwargs) -> CodeField:
    return CodeField(codes=CURRENCIES, message="Give an ISO 4217 currency code in capitals, such as EUR.", **kwargs)


def country_field(**kwargs) -> CodeField:
    return CodeField(codes=COUNTRIES, message="Give an ISO 3166-1 alpha-2 country code in capitals, such as FR.", **kwargs)


class TimeZoneField(StrictCharField):
    def __init__(self, **kwargs):
        super().__init__(max_length=64, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value not in _time_zones():
            raise serializers.ValidationError("Give an IANA time zone name, such as Europe/Paris.")
        return value


class AmountField(MoneyAmountField):
    """Money in minor units to the platform's MAX_AMOUNT; above it, 400 AMOUNT_TOO_LARGE naming the field."""

    def to_internal_value(self, data):
        if not isinstance(data, bool) and isinstance(data, int) and data > MAX_AMOUNT:
            raise amount_too_large(self.field_name, self.field_name)
        return super().to_internal_value(data)


class AttributesField(serializers.DictField):
    """A JSON object of at most ATTRIBUTES_MAX_BYTES bytes (compact JSON)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            check_attributes(value)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.detail["attributes"]) from None
        return value


# --- Merchants ------------------------------------------------------------------------------------


class MerchantSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    name = serializers.CharField(read_only=True)
    slug = serializers.CharField(read_only=True)
    legalName = serializers.CharField(read_only=True)
    defaultCurrency = serializers.CharField(read_only=True)
    country = serializers.CharField(read_only=True)
    timezone = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=Merchant.Status.choices, read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class MerchantCreateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.merchant_create."""

    name = _name()
    slug = StrictCharField(
        max_length=64,
        validators=[RegexValidator(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$", "Lower-case letters and digits, joined by '-' or '_'.")],
        help_text="Unique among live merchants.",
    )
    legalName = _name(required=False, allow_blank=True)
    defaultCurrency = currency_field()
    country = country_field()
    timezone = TimeZoneField(required=False)
    status = serializers.ChoiceField(choices=Merchant.Status.choices, required=False)


class MerchantUpdateSerializer(MerchantCreateSerializer):
    """Validates to the keyword arguments of services.merchant_update (every field optional)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class MerchantSummarySerializer(BaseSerializer):
    """The footer summary (documentation of the answer; counts by status, media in bytes)."""

    snake_case_sources = False

    merchantId = SnowflakeField(read_only=True)
    products = serializers.DictField(child=serializers.IntegerField(), read_only=True, help_text="DRAFT, PUBLISHED, ARCHIVED")
    variants = serializers.DictField(child=serializers.IntegerField(), read_only=True, help_text="ACTIVE, INACTIVE")
    media = serializers.DictField(child=serializers.IntegerField(), read_only=True, help_text="count, bytes")
    integrations = serializers.DictField(child=serializers.IntegerField(), read_only=True, help_text="ACTIVE, INACTIVE")
    orders = serializers.DictField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text="Sale orders by status (DRAFT, PLACED, PAID...)",
    )
    revenueThisMonth = serializers.DictField(
        child=serializers.IntegerField(), read_only=True, help_text="Gross of the orders paid this month (UTC), minor units by currency"
    )


# --- Products -------------------------------------------------------------------------------------


class ProductSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    name = serializers.CharField(read_only=True)
    description = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=Product.Status.choices, read_only=True)
    taxGroupId = SnowflakeField(read_only=True, allow_null=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class ProductUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.product_update."""

    name = _name()
    description = StrictCharField(max_length=10000, allow_blank=True, required=False)
    status = serializers.ChoiceField(choices=Product.Status.choices, required=False)
    taxGroupId = SnowflakeField(required=False, allow_null=True, help_text="Taxation's TaxGroup id, or null.")

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class ProductCreateSerializer(ProductUpdateSerializer):
    """Validates to the keyword arguments of services.product_create."""

    merchantId = SnowflakeField()

    def __init__(self, *args, **kwargs):
        kwargs["partial"] = False
        super().__init__(*args, **kwargs)


# --- Variants -------------------------------------------------------------------------------------


class VariantSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    primaryProductId = SnowflakeField(read_only=True)
    sku = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    priceAmount = serializers.IntegerField(read_only=True)
    currency = serializers.CharField(read_only=True)
    unitCostAmount = serializers.IntegerField(read_only=True, allow_null=True)
    attributes = serializers.DictField(read_only=True)
    status = serializers.ChoiceField(choices=ProductVariant.Status.choices, read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class VariantUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.variant_update."""

    sku = StrictCharField(max_length=64, validators=[single_line], help_text="Unique among the merchant's live variants.")
    name = _name(required=False, allow_blank=True)
    priceAmount = AmountField(help_text="Minor units of currency (1250 is 12.50 EUR).")
    currency = currency_field()
    unitCostAmount = AmountField(required=False, allow_null=True)
    attributes = AttributesField(required=False, help_text=f"A JSON object of at most {ATTRIBUTES_MAX_BYTES} bytes.")
    status = serializers.ChoiceField(choices=ProductVariant.Status.choices, required=False)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class VariantCreateSerializer(VariantUpdateSerializer):
    """Validates to the keyword arguments of services.variant_create."""

    primaryProductId = SnowflakeField(source="product_id", help_text="The product this is a variant of.")

    def __init__(self, *args, **kwargs):
        kwargs["partial"] = False
        super().__init__(*args, **kwargs)


# --- Provider integrations ------------------------------------------------------------------------


class IntegrationSerializer(BaseSerializer):
    """An integration as every route answers it: the credential only as its mask."""

    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(source="principal_id", read_only=True)
    group = serializers.CharField(read_only=True)
    principalType = serializers.CharField(read_only=True)
    principalId = SnowflakeField(read_only=True)
    code = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    environment = serializers.ChoiceField(choices=Configuration.Environment.choices, read_only=True)
    status = serializers.ChoiceField(choices=Configuration.Status.choices, read_only=True)
    settings = serializers.DictField(read_only=True)
    credential = serializers.CharField(
        source="credential_mask", read_only=True, help_text="Masked: eight stars and at most the last 4 characters."
    )
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class IntegrationUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.integration_update."""

    name = _name(required=False, allow_blank=True)
    environment = serializers.ChoiceField(choices=Configuration.Environment.choices, required=False)
    status = serializers.ChoiceField(choices=Configuration.Status.choices, required=False)
    settings = serializers.DictField(required=False, help_text="Settings that are not secret (shown in responses).")
    credential = StrictCharField(
        max_length=4096, write_only=True, trim_whitespace=False, help_text="Write-only: sealed at rest, never returned."
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class IntegrationCreateSerializer(IntegrationUpdateSerializer):
    """Validates to the keyword arguments of services.integration_create."""

    merchantId = SnowflakeField()
    code = StrictCharField(
        max_length=64,
        validators=[RegexValidator(r"^[A-Za-z0-9_.-]+$", "Letters, digits, '_', '.' and '-' only.")],
        help_text="The provider.",
    )

    def __init__(self, *args, **kwargs):
        kwargs["partial"] = False
        super().__init__(*args, **kwargs)


# --- Media ----------------------------------------------------------------------------------------


class MediaSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    productId = SnowflakeField(read_only=True)
    contentType = serializers.CharField(read_only=True)
    sizeBytes = serializers.IntegerField(read_only=True)
    sha256 = serializers.CharField(read_only=True)
    filename = serializers.CharField(read_only=True)
    url = serializers.SerializerMethodField(help_text="A presigned download URL, valid for COMMERCE_MEDIA_URL_TTL_SECONDS.")
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)

    def get_url(self, media) -> str:
        return storage.presigned_url(media.object_key, media.content_type)


class MediaUploadSerializer(BaseSerializer):
    """A multipart form: `productId` and `file` (validates to services.media_upload's arguments)."""

    productId = SnowflakeField()
    file = serializers.FileField(allow_empty_file=False)


# --- Search ---------------------------------------------------------------------------------------


class SearchQuerySerializer(BaseSerializer):
    q = StrictCharField(max_length=200, help_text="Words; each also matches as a prefix. Typos are tolerated when nothing matches.")
    merchantId = SnowflakeField(required=False)
    status = serializers.ChoiceField(choices=[Product.Status.PUBLISHED, Product.Status.ARCHIVED], required=False)
    minPriceAmount = serializers.IntegerField(source="min_price", min_value=0, max_value=MAX_AMOUNT, required=False)
    maxPriceAmount = serializers.IntegerField(source="max_price", min_value=0, max_value=MAX_AMOUNT, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100, required=False, default=20)


class SearchHitSerializer(BaseSerializer):
    """A match: from the index (with highlights and prices), or from the fallback query (without)."""

    id = SnowflakeField(source="pk", read_only=True)
    merchantId = SnowflakeField(read_only=True)
    name = serializers.CharField(read_only=True)
    status = serializers.CharField(read_only=True)
    minPriceAmount = serializers.IntegerField(read_only=True, allow_null=True, default=None)
    maxPriceAmount = serializers.IntegerField(read_only=True, allow_null=True, default=None)
    currency = serializers.CharField(read_only=True, default="")
    highlights = serializers.SerializerMethodField(
        help_text="Name and description fragments with matches between <mark> and </mark>; the text is not HTML-escaped."
    )

    def get_highlights(self, hit) -> dict | None:
        if not hasattr(hit, "name_highlight"):
            return None
        return {"name": hit.name_highlight, "description": hit.description_highlight}


class SearchResultSerializer(BaseSerializer):
    snake_case_sources = False

    count = serializers.IntegerField(read_only=True)
    source = serializers.ChoiceField(choices=["index", "fallback"], read_only=True)
    typoTolerant = serializers.BooleanField(read_only=True)
    facets = serializers.DictField(read_only=True, allow_null=True, help_text="status counts and price buckets (index only)")
    results = SearchHitSerializer(many=True, read_only=True)
