"""Statistics against known data: inquiries by status and by day, subscribers by status."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from apps.outreach import services
from apps.outreach.models import Inquiry, Subscriber
from apps.outreach.seeds import run as seed
from tests.outreach.conftest import STATISTICS

pytestmark = pytest.mark.django_db(databases="__all__")


def inquiry_on(day: date, *, hour: int = 12, status: str = Inquiry.Status.SENT, merchant_id: int | None = None) -> Inquiry:
    inquiry = services.inquiry_submit(name="Ada", email="ada@example.com", subject="Hi", message="Hello", merchant_id=merchant_id)
    Inquiry.objects.filter(pk=inquiry.pk).update(created_at=datetime(day.year, day.month, day.day, hour, tzinfo=UTC), status=status)
    return inquiry


def subscribers(**counts: int) -> None:
    for status, count in counts.items():
        for _ in range(count):
            Subscriber.objects.create(
                email=f"{services.new_token()[0].lower()}@example.com", status=status, token_hash=services.new_token()[1]
            )


@pytest.fixture
def known_data():
    inquiry_on(date(2025, 3, 1), hour=0)
    inquiry_on(date(2025, 3, 1), hour=23, status=Inquiry.Status.CANCELLED)
    inquiry_on(date(2025, 3, 3), merchant_id=101)
    inquiry_on(date(2025, 3, 3), status=Inquiry.Status.CANCELLED, merchant_id=101)
    inquiry_on(date(2025, 3, 3), merchant_id=202)
    inquiry_on(date(2025, 2, 28), hour=23)  # outside the range
    inquiry_on(date(2025, 3, 4))  # outside the range
    inquiry_on(date(2025, 3, 2)).delete()  # deleted: not counted
    subscribers(PENDING=1, ACTIVE=3, UNSUBSCRIBED=2)


def test_statistics_over_a_range(operator, known_data, django_assert_num_queries):
    with django_assert_num_queries(3, using="outreach"):  # three aggregate queries, no per-row work
        response = operator.get(STATISTICS, {"from": "2025-03-01", "to": "2025-03-03"})

    assert response.status_code == 200, response.content
    assert response.json() == {
        "from": "2025-03-01",
        "to": "2025-03-03",
        "inquiries": {
            "total": 5,
            "byStatus": {"SENT": 3, "CANCELLED": 2},
            "byDay": [
                {"date": "2025-03-01", "total": 2, "sent": 1, "cancelled": 1},
                {"date": "2025-03-02", "total": 0, "sent": 0, "cancelled": 0},
                {"date": "2025-03-03", "total": 3, "sent": 2, "cancelled": 1},
            ],
        },
        "subscribers": {"active": 3, "inactive": 3, "byStatus": {"PENDING": 1, "ACTIVE": 3, "UNSUBSCRIBED": 2}},
    }


def test_a_merchants_staff_get_their_merchants_figures(make_caller, known_data):
    seed()
    owner = make_caller(roles=[("OWNER", 101)]).client()

    body = owner.get(STATISTICS, {"from": "2025-03-01", "to": "2025-03-03"}).json()

    assert body["inquiries"]["byStatus"] == {"SENT": 1, "CANCELLED": 1}
    assert body["subscribers"]["byStatus"] == {"PENDING": 0, "ACTIVE": 0, "UNSUBSCRIBED": 0}


def test_the_default_range_is_the_last_30_days(operator):
    body = operator.get(STATISTICS).json()

    assert len(body["inquiries"]["byDay"]) == 30
    assert body["inquiries"]["byDay"][-1]["date"] == body["to"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "2025-03-05", "to": "2025-03-01"}, "from"),
        ({"from": "2024-01-01", "to": "2025-03-01"}, "from"),
        ({"from": "March 1st"}, "from"),
        ({"to": "2025-13-01"}, "to"),
        ({"since": "2025-01-01"}, "since"),
        ({"from": "9999-12-31", "to": "9999-12-31"}, "to"),
        ({"from": "0001-01-01", "to": "0001-01-01"}, "from"),
    ],
)
def test_bad_ranges_are_a_validation_problem(operator, query, field):
    response = operator.get(STATISTICS, query)

    assert response.status_code == 400
    assert field in {error["field"] for error in response.json()["errors"]}


def test_a_full_year_is_allowed(operator):
    response = operator.get(STATISTICS, {"from": "2024-01-01", "to": "2024-12-31"})

    assert response.status_code == 200
    assert len(response.json()["inquiries"]["byDay"]) == 366
