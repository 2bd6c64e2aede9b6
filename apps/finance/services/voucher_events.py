"""Finance's events (docs/services/finance.md, Events): `voucher.posted` for every voucher posted,
whatever posted it (the API, the admin, an event, a void's reversal), and `voucher.voided` for a
void. Called inside the posting's or the void's transaction: the Kafka event is an outbox row on
`finance.vouchers` keyed by the voucher id (one COPY for a batch), and the merchant's finance room
`merchant.<merchantId>.finance` gets the same body as `finance.<event>` once the transaction
commits (the kernel has no outbox path to rooms: payment's room is sent on commit the same way)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.utils import timezone

from apps.finance.models import FinanceTransaction, Voucher
from apps.finance.services.accounts import DB
from merchant_platform import realtime
from merchant_platform.messaging import publish_many, topics

SOURCE = "finance"
VOUCHER_POSTED = "voucher.posted"
VOUCHER_VOIDED = "voucher.voided"


def finance_room(merchant_id: int) -> str:
    """The merchant's finance room: under `merchant.<id>`, as payment's `merchant.<id>.payment`
    (signal lets those who may read the merchant's vouchers join it: docs/services/signal.md, Rooms)."""
    return f"merchant.{merchant_id}.finance"


def voucher_body(voucher: Voucher, lines: Sequence[FinanceTransaction]) -> dict:
    """The voucher as the events carry it (contract FINANCE_VOUCHER): JSON values only, since the
    room's channel layer carries the same body. `currency` and `totalAmount` (the debits, equal to the
    credits) are null when the lines are in several currencies, each balanced by itself."""
    currencies = {line.currency for line in lines}
    single = len(currencies) == 1
    return {
        "id": str(voucher.id),
        "merchantId": str(voucher.merchant_id),
        "voucherNumber": voucher.voucher_number,
        "fiscalYear": voucher.fiscal_year,
        "kind": voucher.kind,
        "reason": voucher.reason,
        "status": voucher.status,
        "date": voucher.date.isoformat(),
        "memo": voucher.memo,
        "sourceType": voucher.source_type,
        "sourceId": voucher.source_id,
        "reversesId": None if voucher.reverses_id is None else str(voucher.reverses_id),
        "voidedAt": None if voucher.voided_at is None else voucher.voided_at.isoformat(),
        "currency": next(iter(currencies)) if single else None,
        "totalAmount": sum(line.debit for line in lines) if single else None,
        "lines": [
            {
                "id": str(line.id),
                "lineNumber": line.line_number,
                "accountId": str(line.account_id),
                "currency": line.currency,
                "debitAmount": line.debit,
                "creditAmount": line.credit,
            }
            for line in lines
        ],
    }


def vouchers_announce(event_type: str, vouchers: Iterable[tuple[Voucher, Sequence[FinanceTransaction]]]) -> None:
    """Announce `event_type` for each (voucher, its lines), in order, inside the caller's transaction
    on finance's alias: one outbox COPY for them all, and one room send each after the commit."""
    timestamp = timezone.now().isoformat()
    bodies = [
        (voucher, {"event": event_type, "timestamp": timestamp, "source": SOURCE, "voucher": voucher_body(voucher, lines)})
        for voucher, lines in vouchers
    ]
    if not bodies:
        return
    publish_many(topics.FINANCE_VOUCHERS.name, [(voucher.id, body) for voucher, body in bodies], event_type=event_type, using=DB)
    for voucher, body in bodies:
        realtime.broadcast(finance_room(voucher.merchant_id), f"{SOURCE}.{event_type}", body, using=DB)
