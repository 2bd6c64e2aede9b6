"""The shared cache stores JSON: a value written to Redis by anyone is data, never code to unpickle."""

from __future__ import annotations

import json
import pickle

import pytest
from django.core.cache import cache
from django_redis import get_redis_connection


def test_cached_values_are_json_in_redis():
    cache.set("kernel-test:json", {"grants": ["ADMIN"], "n": 1}, 30)

    raw = get_redis_connection("default").get(cache.make_key("kernel-test:json"))

    assert json.loads(raw) == {"grants": ["ADMIN"], "n": 1}


def test_a_pickle_planted_in_redis_is_not_unpickled():
    get_redis_connection("default").set(cache.make_key("kernel-test:planted"), pickle.dumps({"role": "SUPER_ADMIN"}))

    with pytest.raises(ValueError):  # not JSON: refused, never executed
        cache.get("kernel-test:planted")
