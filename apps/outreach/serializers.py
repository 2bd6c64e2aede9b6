"""Request and response shapes of the outreach API (camelCase JSON, ids as strings).

Input serializers are strict: a field the endpoint does not accept is an error rather than silently
ignored, every string has a length limit, and single-line fields refuse control characters.
No serializer has a field for the subscriber's token or its hash.
"""

from __future__ import annotations

from datetime import date, timedelta

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.utils import timezone
from rest_framework import serializers

from apps.outreach.models import Inquiry, Subscriber
from merchant_platform.serializers import (
    BaseModelSerializer,
    BaseSerializer,
    PhoneField,
    SnowflakeField,
    StrictCharField,
    multi_line,
    single_line,
)

TOKEN_PATTERN = r"^[A-Za-z0-9_-]{43}$"  # secrets.token_urlsafe(32)
STATISTICS_MAX_DAYS = 366
STATISTICS_DEFAULT_DAYS = 30


class TokenField(StrictCharField):
    def __init__(self, **kwargs):
        super().__init__(max_length=64, validators=[RegexValidator(TOKEN_PATTERN, message="This is not a valid token.")], **kwargs)


# --- Public ---------------------------------------------------------------------------------------


class InquirySubmitSerializer(BaseSerializer):
    """An inquiry from the public form. `merchantId` names the merchant it concerns, if any."""

    name = StrictCharField(max_length=120, validators=[single_line])
    email = serializers.EmailField(max_length=254)
    phone = PhoneField(required=False, allow_blank=True)
    subject = StrictCharField(max_length=200, validators=[single_line])
    message = StrictCharField(max_length=5000, validators=[multi_line])
    merchantId = SnowflakeField(required=False, allow_null=True)


# Documents the submit's answer; the view builds the same dict with `inquiry_receipt`.
class InquiryReceiptSerializer(BaseSerializer):
    """The stored inquiry's id and status."""

    id = SnowflakeField(read_only=True)
    status = serializers.ChoiceField(choices=Inquiry.Status.choices, read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)


_RECEIPT_TIMESTAMP = serializers.DateTimeField()  # unbound, only its to_representation is used


def inquiry_receipt(inquiry: Inquiry) -> dict:
    """`InquiryReceiptSerializer(inquiry).data`, built directly: the busiest public endpoint saves
    the serializer's setup (tests/outreach/test_inquiries.py checks that both agree)."""
    return {"id": str(inquiry.id), "status": inquiry.status, "createdAt": _RECEIPT_TIMESTAMP.to_representation(inquiry.created_at)}


class SubscribeSerializer(BaseSerializer):
    """An address to subscribe, and optionally the subscriber's name."""

    email = serializers.EmailField(max_length=254)
    name = StrictCharField(max_length=120, required=False, allow_blank=True, default="", validators=[single_line])


class ConfirmSerializer(BaseSerializer):
    """The token from the confirmation link."""

    token = TokenField()


class UnsubscribeSerializer(BaseSerializer):
    """JSON `{"unsubscribeToken": ...}` (the spec's name; `token` is accepted as an alias), or RFC 8058's
    one-click form body `List-Unsubscribe=One-Click` with the token in the query string of the
    List-Unsubscribe URL (`query_token` in the context). Every token given must be the same one."""

    snake_case_sources = False

    unsubscribeToken = TokenField(required=False)
    token = TokenField(required=False, help_text="An alias of unsubscribeToken.")

    def get_fields(self):
        fields = super().get_fields()
        fields["List-Unsubscribe"] = serializers.ChoiceField(choices=["One-Click"], required=False)
        return fields

    def validate(self, attrs):
        query_token = self.context.get("query_token")
        if query_token is not None:
            query_token = TokenField().run_validation(query_token)
        given = {token for token in (attrs.get("unsubscribeToken"), attrs.get("token"), query_token) if token}
        if len(given) > 1:
            raise serializers.ValidationError({"unsubscribeToken": ["The tokens given (body and query string) differ."]})
        if not given:
            raise serializers.ValidationError({"unsubscribeToken": ["This field is required."]})
        return {"token": given.pop()}


class AcknowledgementSerializer(BaseSerializer):
    """The answer of subscribe, confirm and unsubscribe: the same whatever the address or token was."""

    detail = serializers.CharField()


# --- Operators ------------------------------------------------------------------------------------


class InquirySerializer(BaseModelSerializer):
    """An inquiry as operators see it; only `status` can be changed."""

    merchantId = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)
    status = serializers.ChoiceField(choices=Inquiry.Status.choices, help_text="Set CANCELLED to mark the inquiry as spam.")

    class Meta:
        model = Inquiry
        fields = ("id", "name", "email", "phone", "subject", "message", "merchantId", "status", "createdAt", "updatedAt")
        read_only_fields = ("name", "email", "phone", "subject", "message")

    def validate(self, attrs):
        if "status" not in attrs:
            raise serializers.ValidationError({"status": ["This field is required."]})
        return attrs


class SubscriberSerializer(BaseModelSerializer):
    """A subscriber as operators see it (its token is never shown)."""

    name = StrictCharField(max_length=120, required=False, allow_blank=True, validators=[single_line])
    status = serializers.ChoiceField(choices=Subscriber.Status.choices, required=False, help_text="Operators may only set UNSUBSCRIBED.")
    confirmedAt = serializers.DateTimeField(read_only=True)
    unsubscribedAt = serializers.DateTimeField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = Subscriber
        fields = ("id", "email", "name", "status", "confirmedAt", "unsubscribedAt", "createdAt", "updatedAt")


class SubscriberCreateSerializer(SubscriberSerializer):
    """Creation takes the address (and a name); the status follows the opt-in rule."""

    email = serializers.EmailField(max_length=254)
    status = serializers.CharField(read_only=True)


class SubscriberUpdateSerializer(SubscriberSerializer):
    email = serializers.EmailField(read_only=True)


# Days whose UTC bounds every date computation can reach (9999-12-31 has no next day).
STATISTICS_DAY_BOUNDS = [MinValueValidator(date(1970, 1, 1)), MaxValueValidator(date(9998, 12, 31))]


class StatisticsQuerySerializer(BaseSerializer):
    """`from` and `to` are inclusive UTC dates; by default the last 30 days up to today."""

    def get_fields(self):
        # `from` is a Python keyword, so the fields are declared by name.
        return {
            "from": serializers.DateField(required=False, validators=STATISTICS_DAY_BOUNDS, help_text="First day (UTC), inclusive."),
            "to": serializers.DateField(
                required=False, validators=STATISTICS_DAY_BOUNDS, help_text="Last day (UTC), inclusive; default today."
            ),
        }

    def validate(self, attrs):
        end = attrs.get("to") or timezone.now().date()
        start = attrs.get("from") or end - timedelta(days=STATISTICS_DEFAULT_DAYS - 1)
        if start > end:
            raise serializers.ValidationError({"from": ["`from` must not be after `to`."]})
        if (end - start).days + 1 > STATISTICS_MAX_DAYS:
            raise serializers.ValidationError({"from": [f"The range may cover at most {STATISTICS_MAX_DAYS} days."]})
        return {"start": start, "end": end}


class StatisticsDaySerializer(BaseSerializer):
    """Inquiries created on one UTC day."""

    date = serializers.DateField()
    total = serializers.IntegerField()
    sent = serializers.IntegerField()
    cancelled = serializers.IntegerField()


class InquiryStatisticsSerializer(BaseSerializer):
    """Inquiries created in the range."""

    snake_case_sources = False

    total = serializers.IntegerField()
    byStatus = serializers.DictField(child=serializers.IntegerField(), help_text="SENT and CANCELLED.")
    byDay = StatisticsDaySerializer(many=True, help_text="Every day of the range, oldest first (UTC days).")


class SubscriberStatisticsSerializer(BaseSerializer):
    """Subscribers now."""

    snake_case_sources = False

    active = serializers.IntegerField()
    inactive = serializers.IntegerField(help_text="PENDING plus UNSUBSCRIBED.")
    byStatus = serializers.DictField(child=serializers.IntegerField(), help_text="PENDING, ACTIVE and UNSUBSCRIBED.")


class StatisticsSerializer(BaseSerializer):
    """Outreach figures over a date range."""

    inquiries = InquiryStatisticsSerializer(help_text="Inquiries created in the range (deleted ones excluded).")
    subscribers = SubscriberStatisticsSerializer(help_text="Subscribers now, whatever the range.")

    def get_fields(self):
        return {"from": serializers.DateField(), "to": serializers.DateField(), **super().get_fields()}
