from django.db import models

from merchant_platform.models import OwnedModel


class Widget(OwnedModel):
    name = models.CharField(max_length=64)
    quantity = models.IntegerField(default=0)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")

    class Meta:
        ordering = ("id",)
