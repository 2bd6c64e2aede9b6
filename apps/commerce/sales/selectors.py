"""Reads of sale orders: the orders with their lines (the API scopes them per caller) and the
figures of them in the merchant's footer summary (apps/commerce/selectors.py)."""

from __future__ import annotations

from django.db.models import Count, QuerySet, Sum
from django.utils import timezone

from apps.commerce.sales.models import SaleOrder


def orders() -> QuerySet[SaleOrder]:
    """Every sale order with its lines."""
    return SaleOrder.objects.prefetch_related("lines")


def orders_by_status(merchant_id: int) -> dict[str, int]:
    """The merchant's orders counted by status, every status named."""
    rows = SaleOrder.objects.filter(merchant_id=merchant_id).values("status").annotate(n=Count("id")).order_by("status")
    return {status: 0 for status in SaleOrder.Status.values} | {row["status"]: row["n"] for row in rows}


def revenue_this_month(merchant_id: int) -> dict[str, int]:
    """Gross of the orders paid since the first of this month (UTC), per currency."""
    month_start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    paid = SaleOrder.objects.filter(merchant_id=merchant_id, status__in=(SaleOrder.Status.PAID, SaleOrder.Status.FULFILLED))
    rows = paid.filter(paid_at__gte=month_start).values("currency").annotate(total=Sum("gross_amount")).order_by("currency")
    return {row["currency"]: row["total"] or 0 for row in rows}
