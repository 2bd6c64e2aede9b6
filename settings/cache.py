"""The shared Redis: cache (authorization decisions, OTP state...), Channels layer, Celery broker."""

from settings.env import env

REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": env.str("CACHE_REDIS_URL", default=REDIS_URL),
        "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="mp"),
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            "SOCKET_CONNECT_TIMEOUT": 2,
            "SOCKET_TIMEOUT": 2,
            # JSON, not django-redis's default pickle: whoever can write to Redis must not be able to
            # run code in every process that reads the cache.
            "SERIALIZER": "django_redis.serializers.json.JSONSerializer",
        },
    },
    # In process, for a process that runs without Redis (inventory, spec 1.3): the policy cache's
    # fallback (merchant_platform.policy.cache).
    "local": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "merchant-platform",
        "OPTIONS": {"MAX_ENTRIES": 10_000},
    },
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [env.str("CHANNEL_LAYER_REDIS_URL", default=REDIS_URL)]},
    }
}
# merchant_platform.realtime's publisher thread: how long sends gather before one Redis round trip,
# and how many may wait for Redis before new ones are dropped (and logged).
REALTIME_PUBLISH_INTERVAL_SECONDS = env.float("REALTIME_PUBLISH_INTERVAL_SECONDS", default=0.005)
REALTIME_PUBLISH_QUEUE_SIZE = env.int("REALTIME_PUBLISH_QUEUE_SIZE", default=10_000)
if REALTIME_PUBLISH_INTERVAL_SECONDS < 0 or REALTIME_PUBLISH_QUEUE_SIZE < 1:  # a queue of size 0 would be unbounded
    raise SystemExit(
        "merchant-platform: REALTIME_PUBLISH_INTERVAL_SECONDS must be >= 0 and REALTIME_PUBLISH_QUEUE_SIZE >= 1, "
        f"got {REALTIME_PUBLISH_INTERVAL_SECONDS} and {REALTIME_PUBLISH_QUEUE_SIZE}"
    )
