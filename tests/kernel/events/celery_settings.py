"""Settings of the Celery workers the tests start: the test settings, a visibility timeout short
enough to see a dead worker's task come back within the test, and a beat entry when asked."""

import os

from settings.test import *  # noqa: F403

CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
if os.environ.get("EVENTS_TEST_BEAT_KEY"):
    CELERY_BEAT_SCHEDULE = {
        "events-test-tick": {
            "task": "events_test.record",
            "schedule": 1.0,
            "args": [os.environ["EVENTS_TEST_BEAT_KEY"]],
            "options": {"queue": os.environ["EVENTS_TEST_QUEUE"]},
        }
    }
