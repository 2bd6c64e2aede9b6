"""The CDC relay checks each change event against its topic's contract when
MESSAGING_VALIDATE_CONTRACTS is on, as the outbox does: a change that breaks it is not sent, the relay
stops on it (logged `cdc.contract_violation`) and the slot stays before it, so nothing is lost once
the contract or the table is fixed; with the setting off nothing is checked. (Topics outside the
catalogue have no contract: test_cdc.py's relays publish to such topics with the setting on.)"""

from __future__ import annotations

import threading

import pytest
from django.conf import settings as django_settings

from merchant_platform.cdc import Capture, parse_change_event
from merchant_platform.cdc.relay import CdcRelay
from merchant_platform.messaging import contracts, topics
from tests.kernel.events.testapp.models import CdcItem
from tests.support.broker import read_topic

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
TABLE = "public.events_testapp_cdcitem"
# A contract for the test table's change stream: names start with a lower-case letter.
ITEM_CHANGE = {
    "type": "object",
    "properties": {
        "op": {"enum": ["c", "u", "d", "r"]},
        "after": {
            "type": ["object", "null"],
            "properties": {"id": {"type": "integer"}, "name": {"type": "string", "pattern": "^[a-z]"}},
            "required": ["id", "name"],
        },
    },
    "required": ["op", "after"],
}


@pytest.fixture
def contracted_topic(make_topic, monkeypatch) -> str:
    """A fresh topic in the catalogue (KAFKA_TOPIC_PREFIX included) with the ITEM_CHANGE contract."""
    prefix = django_settings.KAFKA_TOPIC_PREFIX
    name = make_topic(prefix=f"{prefix}cdc-contract", partitions=1)
    topic = topics.Topic(name[len(prefix) :], producer="commerce", partitions=1)
    monkeypatch.setattr(topics, "CATALOGUE", (*topics.CATALOGUE, topic))
    monkeypatch.setitem(contracts.CONTRACTS, topic.base_name, contracts.Contract(topic, 1, ITEM_CHANGE))
    assert topic.name == name
    return name


def relay_for(slot: str, topic: str) -> CdcRelay:
    return CdcRelay(alias="default", slot=slot, captures=[Capture(topic=topic, table=TABLE)], snapshot_mode="never")


def names(topic: str, expected: int) -> list[str]:
    return [parse_change_event(record.value).after["name"] for record in read_topic(topic, expected=expected)]


def test_a_change_breaking_its_contract_stops_the_relay_before_it_and_loses_nothing(contracted_topic, slot, settings, log_lines):
    settings.MESSAGING_VALIDATE_CONTRACTS = True
    relay = relay_for(slot, contracted_topic)
    relay.setup()
    CdcItem.objects.create(id=1, name="lamp")
    assert relay.poll_once() == 1
    CdcItem.objects.create(id=2, name="Desk")  # breaks the contract
    CdcItem.objects.create(id=3, name="chair")
    with pytest.raises(contracts.ContractViolation, match=r"\$\.after\.name"):
        relay.poll_once()
    relay.close()
    assert log_lines.matching("cdc.contract_violation", contracted_topic)
    assert names(contracted_topic, 1) == ["lamp"]  # neither the bad change nor the one behind it was sent

    # The running relay stops on it (closing its connection) instead of retrying it forever.
    stopped = relay_for(slot, contracted_topic)
    with pytest.raises(contracts.ContractViolation):
        stopped.run(threading.Event())
    assert stopped.connection is None

    # The slot stayed before the bad change: once it is allowed, both changes behind it are sent.
    settings.MESSAGING_VALIDATE_CONTRACTS = False
    fixed = relay_for(slot, contracted_topic)
    fixed.setup()
    assert fixed.poll_once() == 2
    fixed.close()
    assert names(contracted_topic, 3) == ["lamp", "Desk", "chair"]


def test_changes_that_keep_their_contract_are_sent(contracted_topic, slot, settings):
    settings.MESSAGING_VALIDATE_CONTRACTS = True
    relay = relay_for(slot, contracted_topic)
    relay.setup()
    CdcItem.objects.create(id=1, name="lamp")
    CdcItem.objects.filter(pk=1).update(name="desk lamp")
    assert relay.poll_once() == 2
    relay.close()
    assert names(contracted_topic, 2) == ["lamp", "desk lamp"]
