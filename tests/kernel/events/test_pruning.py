"""Processed-message records are kept while a redelivery is possible (PROCESSED_MESSAGE_RETENTION_HOURS,
the topics' retention) and pruned after it by a periodic task."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from merchant_platform.celery import app
from merchant_platform.messaging.tasks import prune_processed_messages
from tests.kernel.events.testapp.models import ProcessedMessage
from tests.support.broker import unique

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


@override_settings(PROCESSED_MESSAGE_RETENTION_HOURS=48)
def test_records_older_than_the_retention_are_pruned_and_newer_ones_kept():
    consumer, now = unique("events-test.consumer"), timezone.now()
    ages = {"old": timedelta(hours=49), "older": timedelta(days=30), "recent": timedelta(hours=47), "new": timedelta(0)}
    ProcessedMessage.objects.bulk_create(
        [ProcessedMessage(consumer=consumer, message_id=name, processed_at=now - age) for name, age in ages.items()]
    )
    assert prune_processed_messages.apply().get() >= 2
    assert sorted(ProcessedMessage.objects.filter(consumer=consumer).values_list("message_id", flat=True)) == ["new", "recent"]


def test_the_pruning_runs_under_beat():
    [entry] = [entry for entry in app.conf.beat_schedule.values() if entry["task"] == prune_processed_messages.name]
    assert entry["schedule"] <= 3600
