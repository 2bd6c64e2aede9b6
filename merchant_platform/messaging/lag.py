"""Consumer lag: how many records of a group's topics it has not committed yet (spec 8: an alert
on inventory's lag above 10,000). Read from the broker (end offsets minus the group's committed
offsets), so it works while the consumers are down, which is when it matters most."""

from __future__ import annotations

from collections.abc import Iterable

from kafka import KafkaConsumer, TopicPartition

from merchant_platform.messaging.config import client_options


def group_lag(group_id: str, topics: Iterable[str]) -> dict[str, dict[int, int]]:
    """{topic: {partition: lag}} of `group_id` on `topics`. A partition the group never committed
    counts from the first retained record (the group would start there: offset reset `earliest`)."""
    reader = KafkaConsumer(**client_options("lag"), group_id=group_id, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for topic in topics for p in sorted(reader.partitions_for_topic(topic) or ())]
        if not partitions:
            return {}
        ends, starts = reader.end_offsets(partitions), reader.beginning_offsets(partitions)
        lag: dict[str, dict[int, int]] = {}
        for partition in partitions:
            committed = reader.committed(partition)
            position = starts[partition] if committed is None else committed
            lag.setdefault(partition.topic, {})[partition.partition] = max(ends[partition] - position, 0)
        return lag
    finally:
        reader.close()
