"""`manage.py create_topics`: create the Kafka topics this process's services use, with their
partition counts (run at migrate time, RUN_MODE=migrate). Idempotent; never shrinks or deletes."""

from __future__ import annotations

import contextlib

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from merchant_platform.lifecycle import check_required_configuration
from merchant_platform.messaging.config import bootstrap_servers, client_options
from merchant_platform.messaging.registry import registered_consumers
from merchant_platform.messaging.topics import CATALOGUE, DEAD_LETTER_PARTITIONS, dead_letter_topic
from merchant_platform.registry import BROKER, active_services, is_all_in_one


def wanted_topics() -> dict[str, int]:
    """topic -> partitions: the catalogue topics the active services produce, every topic their
    consumers read, and the dead-letter topic of each consumed topic."""
    services = {service.name for service in active_services()}
    topics = {topic.name: topic.partitions for topic in CATALOGUE if is_all_in_one() or topic.producer in services}
    catalogue = {topic.name: topic.partitions for topic in CATALOGUE}
    for spec in registered_consumers():
        for topic in spec.topics:
            topics.setdefault(topic, catalogue.get(topic, settings.KAFKA_DEFAULT_PARTITIONS))
            topics.setdefault(dead_letter_topic(topic), DEAD_LETTER_PARTITIONS)
    return topics


class Command(BaseCommand):
    help = "Create the Kafka topics (and dead-letter topics) of the active services with their partition counts."

    def handle(self, *args, **options):
        check_required_configuration()
        topics = wanted_topics()
        if not bootstrap_servers():
            if any(BROKER in service.dependencies for service in active_services()):
                raise CommandError("KAFKA_BOOTSTRAP_SERVERS is empty; cannot create topics")
            self.stdout.write("no broker configured and none needed: no topic to create")
            return
        try:
            admin = KafkaAdminClient(**client_options("admin"), request_timeout_ms=15_000)
        except KafkaError as exc:
            raise CommandError(f"broker {','.join(bootstrap_servers())} unavailable: {exc}") from exc
        try:
            existing = set(admin.list_topics())
            created = []
            for name, partitions in sorted(topics.items()):
                if name in existing:
                    continue
                with contextlib.suppress(TopicAlreadyExistsError):  # created meanwhile by another process
                    admin.create_topics([NewTopic(name, partitions, settings.KAFKA_REPLICATION_FACTOR)])
                    created.append(f"{name}({partitions})")
        except KafkaError as exc:
            raise CommandError(f"topic creation failed: {exc}") from exc
        finally:
            admin.close()
        self.stdout.write(f"topics: {len(topics)} wanted, created {', '.join(created) if created else 'none'}")
