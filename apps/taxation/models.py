"""Taxation records (spec 2.1): tax groups and their items (rates), tax sets binding a product to a
group, and each merchant's rounding policy. Products and merchants are commerce's: plain ids."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from merchant_platform.messaging.models import ProcessedMessageBase
from merchant_platform.models import BaseModel, OwnedModel

RATE_DIGITS, RATE_PLACES = 7, 4  # a percentage 0.0000-100.0000


class TaxGroup(OwnedModel):
    """A named set of tax items a product is provisioned with; belongs to one merchant. A group
    without items may exist (being prepared) but cannot be provisioned (spec 7)."""

    merchant_id = models.BigIntegerField(db_index=True)
    name = models.CharField(max_length=120)
    description = models.CharField(max_length=500, blank=True)

    class Meta(OwnedModel.Meta):
        db_table = "tax_group"
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return self.name


class TaxItem(BaseModel):
    """One rate of a group, applied in `position` order. Inclusive: the price already contains it;
    compound: computed on the net plus every earlier item's tax. In effect from `valid_from` to
    `valid_to` inclusive (either open); items of the same name never overlap in time, so a rate
    change is a new item whose range starts where the old one's ended."""

    group = models.ForeignKey(TaxGroup, on_delete=models.PROTECT, related_name="items")
    name = models.CharField(max_length=120)
    rate = models.DecimalField(max_digits=RATE_DIGITS, decimal_places=RATE_PLACES)
    inclusive = models.BooleanField(default=False)
    compound = models.BooleanField(default=False)
    position = models.PositiveSmallIntegerField()
    valid_from = models.DateField(null=True, blank=True)
    valid_to = models.DateField(null=True, blank=True)

    class Meta(BaseModel.Meta):
        db_table = "tax_item"
        ordering = ("position", "id")
        constraints = [
            models.CheckConstraint(condition=Q(rate__gte=0) & Q(rate__lte=100), name="tax_item_rate_percentage"),
            models.CheckConstraint(
                condition=Q(valid_from__isnull=True) | Q(valid_to__isnull=True) | Q(valid_from__lte=models.F("valid_to")),
                name="tax_item_range_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.rate}%"

    def in_effect(self, day) -> bool:
        return (self.valid_from is None or self.valid_from <= day) and (self.valid_to is None or day <= self.valid_to)


class TaxSet(BaseModel):
    """A product bound to a tax group. At most one ACTIVE set per product; a set is never reactivated:
    provisioning again creates a new one, so the sets of a product are its provisioning history."""

    class Status(models.TextChoices):
        ACTIVE = "ACTIVE"
        DEACTIVATED = "DEACTIVATED"

    merchant_id = models.BigIntegerField(db_index=True)  # the group's, kept for tenant scoping
    product_id = models.BigIntegerField(db_index=True)
    group = models.ForeignKey(TaxGroup, on_delete=models.PROTECT, related_name="tax_sets")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    deactivated_at = models.DateTimeField(null=True, blank=True)
    source = models.CharField(max_length=16, help_text="What provisioned it: api, stream or admin.")

    class Meta(BaseModel.Meta):
        db_table = "tax_set"
        ordering = ("-created_at", "-id")
        constraints = [
            models.UniqueConstraint(fields=["product_id"], condition=Q(status="ACTIVE"), name="tax_set_one_active_per_product"),
        ]

    def __str__(self) -> str:
        return f"product {self.product_id} -> {self.group_id} ({self.status})"


class Product(BaseModel):
    """A commerce product as taxation learned it from commerce's product change stream (or
    `manage.py resync_tax`): its merchant, and `deleted_at` once commerce deleted it. Provisioning
    through the API needs a live product of the tax group's merchant: taxation has no other way to
    know whose a product id is."""

    product_id = models.BigIntegerField(unique=True)  # commerce's id
    merchant_id = models.BigIntegerField(db_index=True)

    class Meta(BaseModel.Meta):
        db_table = "taxation_product"
        ordering = ("product_id",)

    def __str__(self) -> str:
        return f"product {self.product_id} of {self.merchant_id}"


class RoundingPolicy(BaseModel):
    """How a merchant's quotes round (docs/services/taxation.md): per LINE (the default, as AvaTax)
    or per DOCUMENT (each tax item summed over the lines, rounded once, allocated back)."""

    class Mode(models.TextChoices):
        LINE = "LINE"
        DOCUMENT = "DOCUMENT"

    merchant_id = models.BigIntegerField()
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.LINE)

    class Meta(BaseModel.Meta):
        db_table = "rounding_policy"
        ordering = ("merchant_id",)
        constraints = [
            models.UniqueConstraint(fields=["merchant_id"], condition=Q(deleted_at__isnull=True), name="rounding_policy_one_per_merchant"),
        ]
        verbose_name_plural = "rounding policies"

    def __str__(self) -> str:
        return f"{self.merchant_id}: {self.mode}"


class ProcessedMessage(ProcessedMessageBase):
    """Product change events already applied (the kernel's idempotency store, docs/events.md)."""
