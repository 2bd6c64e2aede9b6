"""A consumer process of test_redelivery.py: inventory's registered payment.success handler under
the kernel's runner, on a test topic and group, until it is killed.

    python -m tests.inventory.consume <topic> <group>
"""

from __future__ import annotations

import os
import sys
import threading


def main(topic: str, group: str) -> None:
    import django

    django.setup()
    from apps.inventory.consumers import PAYMENT_CONSUMER
    from merchant_platform.lifecycle import process_start
    from merchant_platform.messaging.registry import ConsumerSpec, registered_consumers
    from merchant_platform.messaging.runner import ConsumerRunner

    process_start("consumer")
    (registered,) = registered_consumers(names={PAYMENT_CONSUMER})
    spec = ConsumerSpec(**{**registered.__dict__, "topics": (topic,), "group_id": group})
    ConsumerRunner(spec, threading.Event()).run()


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings.test")
    main(sys.argv[1], sys.argv[2])
