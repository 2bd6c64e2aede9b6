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
        },
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [env.str("CHANNEL_LAYER_REDIS_URL", default=REDIS_URL)]},
    }
}
