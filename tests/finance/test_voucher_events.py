"""Finance's events (docs/services/finance.md, Events): every posted voucher, whatever posted it (the
API, the admin, a payment event through the real consumer, a void's reversal), writes exactly one
contract-valid `voucher.posted` outbox row on finance.vouchers keyed by its id, in the posting's
transaction; a void writes `voucher.voided`; a batch of postings writes its events with one COPY; the
merchant's finance room receives the same bodies through the shared Redis after the commit, and a
rolled-back posting announces nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import datetime

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from apps.finance import services
from apps.finance.consumers import PAYMENT_CONSUMER
from apps.finance.models import OutboxMessage, ProcessedMessage, Voucher
from apps.finance.services import voucher_events
from merchant_platform.messaging import contracts, topics
from merchant_platform.messaging.outbox import OutboxRelay
from merchant_platform.messaging.stores import outbox_models
from merchant_platform.realtime import group_name
from tests.finance.conftest import books, post
from tests.support.auth import make_caller
from tests.support.broker import produce, read_topic, unique
from tests.support.consumers import consumer_spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__")
API = "/v1/api/finance"


def events_of(voucher_id) -> list[tuple[str, dict]]:
    """The outbox rows keyed by this voucher: (eventType header, body), each checked against the
    topic's contract (the outbox checked it already; this checks the row as it is stored)."""
    rows = OutboxMessage.objects.filter(key=str(voucher_id)).order_by("id")
    for row in rows:
        assert row.topic == topics.FINANCE_VOUCHERS.name
        contracts.check(row.topic, row.value)
        assert row.headers["source"] == "finance"
    return [(row.headers["eventType"], json.loads(row.value)) for row in rows]


def test_a_voucher_posted_over_rest_emits_one_voucher_posted(seeded):
    chart = books()
    client = make_caller(roles=["OWNER"], merchants=[chart["CASH"].merchant_id]).client()
    body = {
        "merchantId": str(chart["CASH"].merchant_id),
        "kind": "SALE",
        "memo": "Counter sale",
        "date": "2026-11-20",
        "lines": [{"accountId": str(chart["CASH"].id), "debit": 1250}, {"accountId": str(chart["SALES"].id), "credit": 1250}],
    }
    key = unique("key")
    created = client.post(f"{API}/vouchers", body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert created.status_code == 201, created.json()
    voucher = created.json()
    replayed = client.post(f"{API}/vouchers", body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert replayed.status_code == 201 and replayed.json()["id"] == voucher["id"]

    ((event_type, event),) = events_of(voucher["id"])  # the replay published nothing
    assert event_type == "voucher.posted"
    assert (event["event"], event["source"]) == ("voucher.posted", "finance")
    assert event["voucher"] == {
        "id": voucher["id"],
        "merchantId": str(chart["CASH"].merchant_id),
        "voucherNumber": voucher["voucherNumber"],
        "fiscalYear": 2026,
        "kind": "SALE",
        "reason": "",
        "status": "issued",
        "date": "2026-11-20",
        "memo": "Counter sale",
        "sourceType": "",
        "sourceId": "",
        "reversesId": None,
        "voidedAt": None,
        "currency": "EUR",
        "totalAmount": 1250,
        "lines": [
            {
                "id": line["id"],
                "lineNumber": line["lineNumber"],
                "accountId": line["accountId"],
                "currency": "EUR",
                "debitAmount": line["debit"],
                "creditAmount": line["credit"],
            }
            for line in voucher["lines"]
        ],
    }


def test_a_void_emits_the_reversals_voucher_posted_then_voucher_voided(seeded):
    chart = books()
    client = make_caller(roles=["OWNER"], merchants=[chart["CASH"].merchant_id]).client()
    sale = post(chart["CASH"], chart["SALES"], 300)
    voided = client.post(f"{API}/vouchers/{sale.id}/actions/void", {"memo": "Wrong till"}, format="json")
    assert voided.status_code == 200, voided.json()
    reversal = Voucher.objects.get(reverses_id=sale.id)

    (posted, (event_type, event)) = events_of(sale.id)
    assert posted[0] == "voucher.posted" and event_type == "voucher.voided"
    assert event["voucher"]["status"] == "voided"
    assert datetime.fromisoformat(event["voucher"]["voidedAt"]) == datetime.fromisoformat(voided.json()["voidedAt"])
    assert event["voucher"]["lines"] == posted[1]["voucher"]["lines"]  # the voided voucher's own lines
    ((reversal_type, reversal_event),) = events_of(reversal.id)
    assert reversal_type == "voucher.posted"
    assert (reversal_event["voucher"]["kind"], reversal_event["voucher"]["reversesId"]) == ("REVERSAL", str(sale.id))
    assert [(line["debitAmount"], line["creditAmount"]) for line in reversal_event["voucher"]["lines"]] == [(0, 300), (300, 0)]
    # The outbox holds them in the void's order: the reversal posted, then the void.
    ids = OutboxMessage.objects.filter(key__in=[str(sale.id), str(reversal.id)]).order_by("id")
    assert [(row.key, row.headers["eventType"]) for row in ids][1:] == [
        (str(reversal.id), "voucher.posted"),
        (str(sale.id), "voucher.voided"),
    ]


def test_the_admin_void_and_correct_announce_through_the_same_services(admin_client):
    chart = books()
    sale = post(chart["CASH"], chart["SALES"], 100)
    cogs = services.cogs_post(merchant_id=chart["COGS"].merchant_id, order_id="o-1", currency="EUR", amount=40)
    admin_client.post("/admin/finance/voucher/", {"action": "void", "_selected_action": [sale.pk]}, follow=True)
    admin_client.post("/admin/finance/voucher/", {"action": "correct", "_selected_action": [cogs.pk]}, follow=True)
    assert [event_type for event_type, _ in events_of(sale.id)] == ["voucher.posted", "voucher.voided"]
    assert [event_type for event_type, _ in events_of(cogs.id)] == ["voucher.posted"]
    correction = Voucher.objects.get(kind="ADJUSTMENT", source_id=str(cogs.id))
    ((_, event),) = events_of(correction.id)
    assert (event["voucher"]["reason"], event["voucher"]["sourceType"]) == ("correction", "correction")


def test_a_voucher_in_two_currencies_has_no_single_currency_or_total():
    chart = books()
    usd = books(chart["CASH"].merchant_id, currency="USD")
    voucher = services.voucher_post(
        merchant_id=chart["CASH"].merchant_id,
        kind="PAYMENT",
        lines=[
            {"account_id": chart["CASH"].id, "debit": 500},
            {"account_id": chart["BANK"].id, "credit": 500},
            {"account_id": usd["CASH"].id, "debit": 70},
            {"account_id": usd["BANK"].id, "credit": 70},
        ],
    )
    ((_, event),) = events_of(voucher.id)
    assert (event["voucher"]["currency"], event["voucher"]["totalAmount"]) == (None, None)
    assert [line["currency"] for line in event["voucher"]["lines"]] == ["EUR", "EUR", "USD", "USD"]


def test_a_batch_of_postings_writes_its_events_with_one_copy():
    chart = books()
    payments = [
        {"finance_account_id": chart["BANK"].id, "merchant_id": chart["BANK"].merchant_id, "amount": 100 + n, "attempt_id": f"att-{n}"}
        for n in range(40)
    ]
    with CaptureQueriesContext(connections["finance"]) as queries:
        vouchers = services.sales_post_from_payments(payments=payments)
    statements = [query["sql"] for query in queries if "outboxmessage" in query["sql"].lower()]
    assert len(statements) == 1 and statements[0].startswith('COPY "finance_outboxmessage"')
    rows = list(OutboxMessage.objects.filter(key__in=[str(v.id) for v in vouchers]).order_by("id"))
    assert [row.key for row in rows] == [str(v.id) for v in vouchers]  # relayed in posting order
    assert [json.loads(row.value)["voucher"]["totalAmount"] for row in rows] == [100 + n for n in range(40)]
    # A replayed batch posts nothing and announces nothing.
    with CaptureQueriesContext(connections["finance"]) as queries:
        services.sales_post_from_payments(payments=payments)
    assert not [query["sql"] for query in queries if "outboxmessage" in query["sql"].lower()]
    assert OutboxMessage.objects.filter(key__in=[str(v.id) for v in vouchers]).count() == 40


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_payment_event_through_the_real_consumer_emits_one_voucher_posted(make_topic, raw_producer, run_consumer):
    chart = books()
    topic = make_topic(partitions=1)
    value = {
        "event": "attempt.success",
        "timestamp": "2026-11-25T10:00:00.000Z",
        "source": "payment",
        "transaction": {"id": "7", "sourceId": "order-1", "status": "SETTLED"},
        "attempt": {
            "id": "att-ev-1",
            "code": "A1",
            "status": "302_SUCCESS",
            "amount": 990,
            "currency": "EUR",
            "financeAccountId": str(chart["BANK"].id),
            "merchantId": str(chart["BANK"].merchant_id),
        },
    }
    produce(raw_producer, topic, [value], headers={"messageId": unique("pay")})
    produce(raw_producer, topic, [value], headers={"messageId": unique("pay")})  # re-published: it replays the voucher
    run_consumer(consumer_spec(PAYMENT_CONSUMER, topic, max_retries=1))
    wait_for(lambda: ProcessedMessage.objects.filter(consumer=PAYMENT_CONSUMER).count() == 2, message="both messages handled")
    (voucher,) = Voucher.objects.filter(merchant_id=chart["BANK"].merchant_id)
    ((event_type, event),) = events_of(voucher.id)
    assert event_type == "voucher.posted"
    assert (event["voucher"]["kind"], event["voucher"]["sourceId"], event["voucher"]["totalAmount"]) == ("SALE", "att-ev-1", 990)
    assert event["voucher"]["date"] == "2026-11-25"


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_the_merchants_finance_room_receives_the_events_after_the_commit_and_nothing_of_a_rollback():
    chart = books()
    merchant_id = chart["CASH"].merchant_id
    room = voucher_events.finance_room(merchant_id)
    layer = get_channel_layer()

    def post_then_roll_back():
        with pytest.raises(RuntimeError), transaction.atomic(using=services.DB):
            post(chart["CASH"], chart["SALES"], 999)
            raise RuntimeError("rolled back")
        voucher = post(chart["CASH"], chart["SALES"], 450)
        services.voucher_void(voucher_id=voucher.id)
        return voucher

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_name(room), channel)
        try:
            voucher = await sync_to_async(post_then_roll_back)()
            received = [await asyncio.wait_for(layer.receive(channel), timeout=5) for _ in range(3)]
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(layer.receive(channel), timeout=0.5)
        finally:
            await layer.group_discard(group_name(room), channel)
        return voucher, received

    voucher, received = async_to_sync(scenario)()
    assert room == f"merchant.{merchant_id}.finance"
    assert [message["event"] for message in received] == ["finance.voucher.posted", "finance.voucher.posted", "finance.voucher.voided"]
    assert all(message["room"] == room for message in received)
    # The room gets the bodies the outbox holds, and the rolled-back posting is in neither.
    stored = {(row.key, row.headers["eventType"]): json.loads(row.value) for row in OutboxMessage.objects.all()}
    for message in received:
        key = (message["payload"]["voucher"]["id"], message["payload"]["event"])
        assert stored[key] == message["payload"]
    assert {message["payload"]["voucher"]["totalAmount"] for message in received} == {450}
    assert received[0]["payload"]["voucher"]["id"] == str(voucher.id)
    assert Voucher.objects.filter(merchant_id=merchant_id).count() == 2  # the sale and its reversal


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_finances_outbox_is_relayed_to_the_broker_like_every_outbox(kafka_admin):
    assert outbox_models({services.DB}) == [OutboxMessage]  # what `manage.py consume` relays for finance
    topic = topics.FINANCE_VOUCHERS.name  # created by `manage.py create_topics` (finance produces it)
    if topic not in kafka_admin.list_topics():
        with contextlib.suppress(TopicAlreadyExistsError):
            kafka_admin.create_topics([NewTopic(topic, topics.FINANCE_VOUCHERS.partitions, 1)])
    chart = books()
    voucher = post(chart["CASH"], chart["SALES"], 275)
    OutboxRelay(OutboxMessage).relay_pending()  # the after-commit thread may have sent it first
    row = wait_for(lambda: (found := OutboxMessage.objects.get(key=str(voucher.id))).sent_at and found, message="the row sent")
    (record,) = [record for record in read_topic(topic, expected=None) if record.key == str(voucher.id).encode()]
    assert json.loads(record.value) == json.loads(row.value)
    assert dict(record.headers)["eventType"] == b"voucher.posted"
