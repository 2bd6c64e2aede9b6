"""Configuration of the backbone: group names, client security options, topics, Celery routing,
and the mandatory-broker refusal (spec 7)."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import override_settings

from merchant_platform.celery import SERVICE_QUEUES, app, route_task, worker_queues
from merchant_platform.messaging.config import consumer_group_id, consumer_options, producer_options
from merchant_platform.messaging.topics import CHANGE_STREAMS, dead_letter_topic
from merchant_platform.registry import get_service
from tests.support.processes import PROCESS_SPECIFIC, PROJECT_ROOT


def test_consumer_groups_follow_the_spec_pattern():
    assert consumer_group_id(get_service("inventory")) == "SVC-00050-INVENTORY_CONSUMER_GROUP"
    assert consumer_group_id(get_service("finance")) == "SVC-00040-FINANCE_CONSUMER_GROUP"
    assert consumer_group_id(get_service("taxation")) == "SVC-00032-TAXATION_CONSUMER_GROUP"
    assert consumer_group_id(get_service("outreach")) == "SVC-00100-OUTREACH_CONSUMER_GROUP"


@override_settings(
    KAFKA_BOOTSTRAP_SERVERS=["kafka-1:9093", " ", "kafka-2:9093"],
    KAFKA_SECURITY_PROTOCOL="SASL_SSL",
    KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
    KAFKA_SASL_USERNAME="taxation",
    KAFKA_SASL_PASSWORD="s3cret",
)
def test_sasl_scram_settings_reach_every_client():
    for options in (producer_options(), consumer_options(group_id="g", offset_reset="latest")):
        assert options["bootstrap_servers"] == ["kafka-1:9093", "kafka-2:9093"]
        assert options["security_protocol"] == "SASL_SSL"
        assert options["sasl_mechanism"] == "SCRAM-SHA-512"
        assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("taxation", "s3cret")


def test_plaintext_clients_carry_no_credentials_and_commit_manually():
    options = consumer_options(group_id="g", offset_reset="earliest")
    assert options["security_protocol"] == "PLAINTEXT"
    assert "sasl_plain_password" not in options
    assert options["enable_auto_commit"] is False
    timeouts = (options["session_timeout_ms"], options["heartbeat_interval_ms"], options["max_poll_interval_ms"])
    assert timeouts == (settings.KAFKA_CONSUMER_SESSION_TIMEOUT_MS, 1000, 8000)
    assert producer_options()["acks"] == "all"


def test_change_stream_topics_and_dead_letter_names():
    assert set(CHANGE_STREAMS) == {"MERCHANT", "PRODUCT", "PRODUCT_VARIANT"}
    assert dead_letter_topic("payment.success") == "payment.success.DLQ"


def test_celery_queues_and_routes():
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    assert {"SYNC_PRODUCT_QUEUE", "IDENTITY_MAIL_QUEUE", "PAYMENT_SCHEDULER_QUEUE", "PAYMENT_CONFIRMATION_QUEUE"} <= set(worker_queues())
    assert SERVICE_QUEUES["commerce"] == ("SYNC_PRODUCT_QUEUE",)
    assert route_task("apps.payment.tasks.expire_attempt", (), {}, {}) == {"queue": "payment"}
    assert route_task("merchant_platform.cdc.check_slot_lag", (), {}, {}) is None

    @app.task(name="apps.commerce.tasks.events_test_named_queue", named_queue="SYNC_PRODUCT_QUEUE")
    def named(): ...

    @app.task(name="apps.payment.tasks.events_test_service_queue")
    def unnamed(): ...

    def queue_of(task):
        return app.amqp.router.route(task._get_exec_options(), task.name, (), {}, task)["queue"].name

    assert (queue_of(named), queue_of(unnamed)) == ("SYNC_PRODUCT_QUEUE", "payment")
    app.loader.import_default_modules()  # what a worker or beat does at start (task autodiscovery)
    assert app.conf.beat_schedule["merchant_platform.cdc.check_slot_lag"]["task"] == "merchant_platform.cdc.check_slot_lag"


def _run_manage(*args, **env):
    base = {k: v for k, v in os.environ.items() if k not in PROCESS_SPECIFIC}
    return subprocess.run(
        [sys.executable, "manage.py", *args], check=False, cwd=PROJECT_ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("command", "service"), [("consume", "inventory"), ("create_topics", "finance")])
def test_mandatory_broker_refusal(command, service):
    result = _run_manage(command, APP_SERVICE=service, KAFKA_BOOTSTRAP_SERVERS="", DJANGO_SETTINGS_MODULE="settings")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [f"merchant-platform: {service} needs a message broker but KAFKA_BOOTSTRAP_SERVERS is empty; refusing to start"]
