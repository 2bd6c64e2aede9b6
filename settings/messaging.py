"""Kafka (kafka-python), Celery and object storage settings."""

from settings.env import IS_TEST, env

KAFKA_BOOTSTRAP_SERVERS = env.list("KAFKA_BOOTSTRAP_SERVERS", default=["127.0.0.1:9092"])
KAFKA_SECURITY_PROTOCOL = env.str("KAFKA_SECURITY_PROTOCOL", default="PLAINTEXT")
KAFKA_SASL_MECHANISM = env.str("KAFKA_SASL_MECHANISM", default="SCRAM-SHA-512")
KAFKA_SASL_USERNAME = env.str("KAFKA_SASL_USERNAME", default="")
KAFKA_SASL_PASSWORD = env.str("KAFKA_SASL_PASSWORD", default="")

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=env.str("REDIS_URL", default="redis://127.0.0.1:6379/0"))
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=CELERY_BROKER_URL)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)

S3_ENDPOINT_URL = env.str("S3_ENDPOINT_URL", default="http://127.0.0.1:8333")
S3_ACCESS_KEY_ID = env.str("S3_ACCESS_KEY_ID", default="merchant")
S3_SECRET_ACCESS_KEY = env.str("S3_SECRET_ACCESS_KEY", default="merchant-secret")
S3_REGION = env.str("S3_REGION", default="us-east-1")

# Snowflake worker-id leases in Redis (ARCHITECTURE.md section 4).
SNOWFLAKE_LEASE_TTL_SECONDS = env.int("SNOWFLAKE_LEASE_TTL_SECONDS", default=30)
SNOWFLAKE_LEASE_ENABLED = env.bool("SNOWFLAKE_LEASE_ENABLED", default=True)
TESTING = IS_TEST
