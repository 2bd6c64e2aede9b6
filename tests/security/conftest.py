"""The broker fixtures of tests/events for the event half of the hostile-tenant sweep."""

from tests.events.conftest import kafka_admin, make_topic, raw_producer  # noqa: F401 (fixtures)
