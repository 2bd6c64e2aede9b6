"""A second platform on a shared broker: KAFKA_TOPIC_PREFIX and KAFKA_CONSUMER_GROUP_SUFFIX give it
topics and consumer groups of its own (what the scenario's scratch platform runs with)."""

from __future__ import annotations

from merchant_platform.messaging import topics
from merchant_platform.messaging.config import consumer_group_id
from merchant_platform.registry import all_services


def test_no_prefix_and_no_suffix_keep_the_spec_names():
    assert str(topics.PAYMENT_SUCCESS) == topics.PAYMENT_SUCCESS.name == "payment.success"
    inventory = next(service for service in all_services() if service.name == "inventory")
    assert consumer_group_id(inventory) == "SVC-00050-INVENTORY_CONSUMER_GROUP"


def test_the_prefix_and_suffix_apply_to_every_topic_group_and_capture(settings):
    settings.KAFKA_TOPIC_PREFIX = "scratch-1."
    settings.KAFKA_CONSUMER_GROUP_SUFFIX = "-scratch-1"
    assert {topic.name for topic in topics.CATALOGUE} == {f"scratch-1.{topic.base_name}" for topic in topics.CATALOGUE}
    assert topics.dead_letter_topic(str(topics.INVENTORY_COGS)) == "scratch-1.inventory.cogs.DLQ"
    inventory = next(service for service in all_services() if service.name == "inventory")
    assert consumer_group_id(inventory) == "SVC-00050-INVENTORY_CONSUMER_GROUP-scratch-1"
    settings.KAFKA_CONSUMER_GROUP_SUFFIX = "-scratch-1-{consumer}"
    assert consumer_group_id(inventory, "inventory.merchant") == "SVC-00050-INVENTORY_CONSUMER_GROUP-scratch-1-inventory.merchant"
