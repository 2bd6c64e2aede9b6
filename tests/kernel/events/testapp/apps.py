from django.apps import AppConfig


class EventsTestAppConfig(AppConfig):
    """A test-only app for the event backbone: an outbox, processed-message and effect tables, a
    captured table, test consumers and Celery tasks. Installed by settings/test.py only."""

    name = "tests.kernel.events.testapp"
    label = "events_testapp"
    default_auto_field = "django.db.models.BigAutoField"
