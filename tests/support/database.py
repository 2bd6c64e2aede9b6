"""Data a whole test module shares, made once and rolled back at the module's end."""

from __future__ import annotations

import contextlib

from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connections, transaction

from merchant_platform.seeds import run_seeds


@contextlib.contextmanager
def seeded_module_transaction(django_db_blocker):
    """The seeds, inside a transaction on every database that is rolled back when the block ends;
    the data a module fixture makes in the block nests in it too, and so does each test's own
    transaction.

    Requests that do not go through Django's test client (Schemathesis calls the WSGI app directly)
    would close the connections, and with them the transaction, at each request's end: the test
    client keeps a test's connections open by taking close_old_connections off the request signals
    around each request (and putting it back after, so after any test-client request it is connected
    again even where merchant_platform/db.py had replaced it). The block does the same for its
    whole length."""
    signals = [signal for signal in (request_started, request_finished) if signal.disconnect(close_old_connections)]
    with django_db_blocker.unblock(), contextlib.ExitStack() as stack:
        for signal in signals:
            stack.callback(signal.connect, close_old_connections)
        for alias in connections:
            stack.enter_context(transaction.atomic(using=alias))
        run_seeds()
        yield
        for alias in connections:
            transaction.set_rollback(True, using=alias)
