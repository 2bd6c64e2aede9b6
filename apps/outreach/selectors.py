"""Reads of the outreach service: the statistics."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate

from apps.outreach.models import Inquiry, Subscriber


def outreach_statistics(*, inquiries: QuerySet[Inquiry], subscribers: QuerySet[Subscriber], start: date, end: date) -> dict:
    """Over the given (already scoped) querysets: inquiries by status and by UTC day over
    [start, end], and subscribers by status now. Three aggregate queries; the only Python loop walks
    the (bounded) days of the range."""
    since = datetime.combine(start, time.min, tzinfo=UTC)
    until = datetime.combine(end + timedelta(days=1), time.min, tzinfo=UTC)
    inquiries = inquiries.filter(created_at__gte=since, created_at__lt=until)
    sent, cancelled = Q(status=Inquiry.Status.SENT), Q(status=Inquiry.Status.CANCELLED)

    totals = inquiries.aggregate(total=Count("id"), sent=Count("id", filter=sent), cancelled=Count("id", filter=cancelled))
    per_day = {
        row["day"]: row
        for row in inquiries.annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day")
        .annotate(total=Count("id"), sent=Count("id", filter=sent), cancelled=Count("id", filter=cancelled))
        .order_by("day")
    }
    by_day = []
    for offset in range((end - start).days + 1):
        day = start + timedelta(days=offset)
        row = per_day.get(day, {})
        by_day.append({"date": day, "total": row.get("total", 0), "sent": row.get("sent", 0), "cancelled": row.get("cancelled", 0)})

    subscribers = subscribers.aggregate(
        pending=Count("id", filter=Q(status=Subscriber.Status.PENDING)),
        active=Count("id", filter=Q(status=Subscriber.Status.ACTIVE)),
        unsubscribed=Count("id", filter=Q(status=Subscriber.Status.UNSUBSCRIBED)),
    )
    return {
        "from": start,
        "to": end,
        "inquiries": {
            "total": totals["total"],
            "byStatus": {Inquiry.Status.SENT.value: totals["sent"], Inquiry.Status.CANCELLED.value: totals["cancelled"]},
            "byDay": by_day,
        },
        "subscribers": {
            "active": subscribers["active"],
            "inactive": subscribers["pending"] + subscribers["unsubscribed"],
            "byStatus": {
                Subscriber.Status.PENDING.value: subscribers["pending"],
                Subscriber.Status.ACTIVE.value: subscribers["active"],
                Subscriber.Status.UNSUBSCRIBED.value: subscribers["unsubscribed"],
            },
        },
    }
