"""The per-process copy of the "valid after" instants (merchant_platform.revocation.local_copies): a
move is seen at once by the process that made it, within LOCAL_COPY_SECONDS by the others (here a
second LocalCopies stands for another process), and Redis down behaves as without the copy."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import DatabaseError
from django.utils import timezone
from django_redis import get_redis_connection

from merchant_platform import revocation

pytestmark = pytest.mark.django_db

USER_ID = 8_800_000_001
# A token's `iat`: before every instant the tests move to.
ISSUED_AT = time.time() - 60


@pytest.fixture(autouse=True)
def no_redis_copy():
    """The database rolls back after each test; the Redis copy of its instant must go too."""
    get_redis_connection("default").delete(revocation._key(USER_ID))
    yield
    get_redis_connection("default").delete(revocation._key(USER_ID))


@pytest.fixture
def process_copies(monkeypatch):
    """Two processes' copies; `use(copy)` makes the module serve from that one."""
    first, second = revocation.LocalCopies(), revocation.LocalCopies()

    def use(copy: revocation.LocalCopies) -> None:
        monkeypatch.setattr(revocation, "local_copies", copy)

    use(first)
    return first, second, use


@pytest.fixture
def redis_down(settings):
    settings.CACHES = {"default": {**django_settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:9/0"}}
    yield
    revocation._state["redis_down_until"] = 0.0


def _issued_now_revoked() -> bool:
    return revocation.issued_before_cutoff(USER_ID, ISSUED_AT)


def _move() -> None:
    revocation.tokens_valid_after_move(user_id=USER_ID, instant=timezone.now())


def test_a_move_is_seen_at_once_in_its_process_and_within_a_second_in_another(process_copies):
    first, second, use = process_copies
    assert not _issued_now_revoked()  # read and kept by the first process
    use(second)
    assert not _issued_now_revoked()  # and by the second
    use(first)
    _move()
    assert _issued_now_revoked()  # the mover's process: at once
    use(second)
    assert not _issued_now_revoked()  # the other process serves its copy for up to a second...
    time.sleep(revocation.LOCAL_COPY_SECONDS)
    assert _issued_now_revoked()  # ...then reads the move


def test_a_read_that_began_before_a_move_does_not_replace_it():
    copies = revocation.LocalCopies()
    moved = revocation._micros(timezone.now())
    began = time.monotonic()
    copies.put(USER_ID, moved, read_at=time.monotonic())
    copies.put(USER_ID, None, read_at=began)
    copies.put(USER_ID, moved - 1, read_at=began)
    assert copies.get(USER_ID) == (True, moved)


def test_the_copy_keeps_only_recent_users_past_its_size(monkeypatch):
    monkeypatch.setattr(revocation, "_LOCAL_COPIES_PRUNE_AT", 3)
    copies = revocation.LocalCopies()
    old = time.monotonic() - revocation.LOCAL_COPY_SECONDS
    for user_id in (1, 2, 3):
        copies.put(user_id, None, read_at=old)
    copies.put(4, None, read_at=time.monotonic())
    assert copies._entries.keys() == {4}
    assert copies.get(4) == (True, None)


def test_redis_down_reads_postgresql_in_another_process(process_copies, redis_down):
    _, second, use = process_copies
    _move()  # the Redis copy cannot be written
    use(second)
    assert _issued_now_revoked()  # read from PostgreSQL


def test_redis_and_postgresql_down_skip_the_check_and_keep_nothing(process_copies, redis_down, monkeypatch):
    """As without the copy (spec 7): existing tokens keep verifying; the failure is not cached."""
    revocation.tokens_valid_after_move(user_id=USER_ID, instant=timezone.now() + timedelta(seconds=5))
    _, second, use = process_copies
    use(second)

    def unavailable(user_id: int) -> None:
        raise DatabaseError("down")

    monkeypatch.setattr(revocation, "_from_database", unavailable)
    assert not _issued_now_revoked()
    monkeypatch.undo()
    use(second)
    assert _issued_now_revoked()
