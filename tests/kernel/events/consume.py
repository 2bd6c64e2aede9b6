"""A registered consumer in a process of its own, for the tests that kill one (tests/faults/README.md):
the consumer's handler under the kernel's runner, on a test topic and group, until it is killed.

    python -m tests.kernel.events.consume <consumer name> <topic> <group>

The group is new and its topic filled before the process starts, so it reads from the earliest
offset whatever the consumer's own reset is. With CONSUME_KILL_AT=<n> the process SIGKILLs itself
when it has handled its n-th message (counted by this process), at the moment CONSUME_KILL_WHEN names:

- `commit` (the default): after the database commit of the transaction holding that message (and
  its on_commit callbacks), before its offsets are committed, the worst moment: its poll comes again;
- `handler`: inside that transaction, before it commits: the poll's work is rolled back.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def dying_runner(spec, stop: threading.Event, count: int, when: str):
    """A runner of `spec` that SIGKILLs this process once `count` messages were handled."""
    from merchant_platform.messaging.runner import ConsumerRunner

    handled = 0

    def handler(messages):
        nonlocal handled
        spec.handler(messages)
        handled += len(messages) if spec.batch else 1
        if handled >= count:
            die()

    class DyingRunner(ConsumerRunner):
        def _commit(self, messages) -> None:
            # Here the transaction and its on_commit callbacks (a queued task) are done, the offsets not.
            if self.handled >= count:
                die()
            super()._commit(messages)

    if when == "handler":
        return ConsumerRunner(dataclasses.replace(spec, handler=handler), stop)
    return DyingRunner(spec, stop)


def main(name: str, topic: str, group: str) -> None:
    import django

    django.setup()
    from merchant_platform.lifecycle import process_start
    from merchant_platform.messaging.registry import registered_consumers
    from merchant_platform.messaging.runner import ConsumerRunner, tune_interpreter

    process_start("consumer")
    tune_interpreter()
    (registered,) = registered_consumers(names={name})
    spec = dataclasses.replace(registered, topics=(topic,), group_id=group, offset_reset="earliest")
    stop = threading.Event()
    if kill_at := os.environ.get("CONSUME_KILL_AT"):
        runner = dying_runner(spec, stop, int(kill_at), os.environ.get("CONSUME_KILL_WHEN", "commit"))
    else:
        runner = ConsumerRunner(spec, stop)
    runner.run()


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings.test")
    main(*sys.argv[1:4])
