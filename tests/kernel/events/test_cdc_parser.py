"""The consumer-side parser accepts exactly what Debezium's PostgreSQL connector emits."""

import json

import pytest

from merchant_platform.cdc import InvalidChangeEvent, parse_change_event, parse_change_key
from merchant_platform.messaging.messages import Message


def test_parser_accepts_what_debezium_emits():
    source = {
        "version": "2.7.0.Final",
        "connector": "postgresql",
        "name": "commerce",
        "ts_ms": 1,
        "snapshot": "false",
        "db": "mp",
        "sequence": '["1","2"]',
        "schema": "public",
        "table": "merchant",
        "txId": 9,
        "lsn": 2,
        "xmin": None,
    }
    payload = {"before": None, "after": {"id": 1, "name": "Shop"}, "source": source, "op": "c", "ts_ms": 3, "transaction": None}
    wrapped = {
        "schema": {"type": "struct", "fields": [], "optional": False, "name": "commerce.public.merchant.Envelope"},
        "payload": payload,
    }
    for value in (payload, wrapped, json.dumps(wrapped).encode(), json.dumps(payload)):
        event = parse_change_event(value)
        assert (event.op, event.after, event.table, event.lsn, event.tx_id) == ("c", {"id": 1, "name": "Shop"}, "merchant", 2, 9)
    assert parse_change_event(None) is None
    assert parse_change_event({"schema": None, "payload": None}) is None
    deleted = parse_change_event({**payload, "op": "d", "before": {"id": 1, "name": "Shop"}, "after": None})
    assert deleted.is_delete and deleted.row == {"id": 1, "name": "Shop"}
    assert parse_change_key(b'{"schema": {"type": "struct"}, "payload": {"id": 1}}') == {"id": 1}
    for bad in ({"op": "x", "source": source}, {"op": "c", "source": source, "after": None}, [1], b"not json", {"op": "u", "after": {}}):
        with pytest.raises(InvalidChangeEvent):
            parse_change_event(bad)


def test_change_events_are_identified_by_table_lsn_and_key():
    source = {"db": "mp", "schema": "public", "table": "merchant", "lsn": 42, "txId": 7}
    value = json.dumps({"before": None, "after": {"id": 1}, "source": source, "op": "c", "ts_ms": 1}).encode()
    first = Message("cdc.commerce.merchant", 0, 5, '{"id":1}', value)
    republished = Message("cdc.commerce.merchant", 2, 900, '{"id":1}', value)
    assert first.message_id == republished.message_id == 'mp.public.merchant:42:c:{"id":1}'
    assert Message("t", 0, 5, None, b'{"plain": 1}').message_id == "t/0/5"
    assert Message("t", 0, 6, None, b'{"x": 1}', {"messageId": "abc"}).message_id == "abc"
