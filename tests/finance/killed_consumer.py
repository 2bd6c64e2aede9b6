"""Run finance's COGS consumer on a test topic in a process of its own (tests/finance/test_consumers.py).
With FINANCE_TEST_DIE=1 the process dies (exit 137) right after the database commit of a message
of a batch holding a value with `dieAfterCommit`, before the offset commit: what a crash at the worst moment does."""

import dataclasses
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root, as manage.py has it

import django

django.setup()

from django.db import transaction  # noqa: E402

from merchant_platform.messaging.registry import registered_consumers  # noqa: E402
from merchant_platform.messaging.runner import ConsumerRunner  # noqa: E402

(spec,) = registered_consumers(names={"finance.inventory-cogs"})


def handler(messages):  # a batch handler: the poll's new messages
    spec.handler(messages)
    if os.environ.get("FINANCE_TEST_DIE") == "1" and any(message.value.get("dieAfterCommit") for message in messages):
        transaction.on_commit(lambda: os._exit(137), using=spec.alias)


test_spec = dataclasses.replace(
    spec, topics=(os.environ["FINANCE_TEST_TOPIC"],), group_id=os.environ["FINANCE_TEST_GROUP"], handler=handler
)
ConsumerRunner(test_spec, threading.Event()).run()
