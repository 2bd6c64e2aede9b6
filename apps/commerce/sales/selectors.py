"""Reads of sale orders: the orders with their lines (the API scopes them per caller) and the
figures of them in the merchant's footer summary (apps/commerce/selectors.py)."""

from __future__ import annotations

from django.db.models import Count, Prefetch, QuerySet, Sum
from django.utils import timezone

from apps.commerce.sales.models import SaleOrder, SaleReturn, SaleReturnLine


def orders() -> QuerySet[SaleOrder]:
    """Every sale order with its lines and its returns (with theirs)."""
    return SaleOrder.objects.prefetch_related("lines", Prefetch("returns", queryset=sale_returns()))


def sale_returns() -> QuerySet[SaleReturn]:
    """Returns with their lines and the order lines they give back."""
    return SaleReturn.objects.prefetch_related(Prefetch("lines", queryset=SaleReturnLine.objects.select_related("order_line")))


def orders_by_status(merchant_id: int) -> dict[str, int]:
    """The merchant's orders counted by status, every status named."""
    rows = SaleOrder.objects.filter(merchant_id=merchant_id).values("status").annotate(n=Count("id")).order_by("status")
    return {status: 0 for status in SaleOrder.Status.values} | {row["status"]: row["n"] for row in rows}


def revenue_this_month(merchant_id: int) -> dict[str, int]:
    """Per currency, the gross of the orders paid since the first of this month (UTC) less what
    refunds gave back since then (of any order, as finance reverses a sale when it is refunded): a
    month of more refunds than sales shows a negative figure."""
    month_start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    S = SaleOrder.Status
    paid = SaleOrder.objects.filter(
        merchant_id=merchant_id, status__in=(S.PAID, S.FULFILLED, S.PARTIALLY_REFUNDED, S.REFUNDED), paid_at__gte=month_start
    )
    refunded = SaleReturn.objects.filter(merchant_id=merchant_id, status=SaleReturn.Status.SUCCEEDED, succeeded_at__gte=month_start)
    revenue: dict[str, int] = {}
    for rows, sign in ((paid, 1), (refunded, -1)):
        for row in rows.values("currency").annotate(total=Sum("gross_amount")).order_by("currency"):
            revenue[row["currency"]] = revenue.get(row["currency"], 0) + sign * (row["total"] or 0)
    return dict(sorted(revenue.items()))
