"""The worker role's product-search consumer for `scripts/bench commerce`: the consumer registered
as `commerce.product-search` (apps/commerce/consumers.py, what `manage.py consume` runs), under the
kernel's runner, on the run's own topics and in a group of its own, so the bench neither shares
the platform's topics and group on the shared broker nor inherits a backlog.

    python -m benchmarks.commerce_consumer GROUP TOPIC [TOPIC...]   (the bench's server environment)

SIGTERM finishes the message in hand and exits, as `manage.py consume` does.
"""

from __future__ import annotations

import signal
import sys
import threading

import django

CONSUMER = "commerce.product-search"


def main(group: str, topics: list[str]) -> None:
    django.setup()
    from merchant_platform.messaging.producer import close_producer
    from merchant_platform.messaging.registry import ConsumerSpec, registered_consumers
    from merchant_platform.messaging.runner import run_consumers

    (registered,) = registered_consumers(names={CONSUMER})
    spec = ConsumerSpec(**{**registered.__dict__, "topics": tuple(topics), "group_id": group})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    try:
        run_consumers([spec], stop)
    finally:
        close_producer()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
