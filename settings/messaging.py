"""Kafka (kafka-python), Celery and object storage settings."""

from merchant_platform.registry import STORAGE, active_services
from settings.env import IS_TEST, env, secret

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
# The local S3 server (SeaweedFS started by scripts/lib/components.sh, no authentication) takes any
# key; a process whose services use object storage refuses to start outside development and test
# without a real one.
if any(STORAGE in service.dependencies for service in active_services()):
    S3_SECRET_ACCESS_KEY = secret("S3_SECRET_ACCESS_KEY", local_default="merchant-secret")
else:
    S3_SECRET_ACCESS_KEY = env.str("S3_SECRET_ACCESS_KEY", default="")
S3_REGION = env.str("S3_REGION", default="us-east-1")

# Snowflake worker-id leases in Redis (docs/architecture.md section 4).
SNOWFLAKE_LEASE_TTL_SECONDS = env.int("SNOWFLAKE_LEASE_TTL_SECONDS", default=30)
SNOWFLAKE_LEASE_ENABLED = env.bool("SNOWFLAKE_LEASE_ENABLED", default=True)
TESTING = IS_TEST

# Event backbone (merchant_platform.messaging, merchant_platform.cdc; docs/events.md).
# Consumer group timeouts: with Kafka's defaults a group takes tens of seconds to join Tansu.
KAFKA_CONSUMER_SESSION_TIMEOUT_MS = env.int("KAFKA_CONSUMER_SESSION_TIMEOUT_MS", default=6000)
KAFKA_CONSUMER_HEARTBEAT_INTERVAL_MS = env.int("KAFKA_CONSUMER_HEARTBEAT_INTERVAL_MS", default=1000)
KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS = env.int("KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS", default=8000)
KAFKA_CONSUMER_MAX_POLL_RECORDS = env.int("KAFKA_CONSUMER_MAX_POLL_RECORDS", default=500)
# Appended to every service's consumer group name (SVC-00050-INVENTORY_CONSUMER_GROUP<suffix>): lets a
# second platform (a test's scratch one) share a broker without joining the first one's groups.
# `{consumer}` in it is replaced by the consumer's name: one group per consumer (on Tansu, members of
# one group subscribed to different topics are not all assigned partitions: docs/events.md).
KAFKA_CONSUMER_GROUP_SUFFIX = env.str("KAFKA_CONSUMER_GROUP_SUFFIX", default="")
# Put before every topic name of the catalogue (merchant_platform/messaging/topics.py), for the same reason.
KAFKA_TOPIC_PREFIX = env.str("KAFKA_TOPIC_PREFIX", default="")
KAFKA_DEFAULT_PARTITIONS = env.int("KAFKA_DEFAULT_PARTITIONS", default=3)
KAFKA_REPLICATION_FACTOR = env.int("KAFKA_REPLICATION_FACTOR", default=1)
OUTBOX_RELAY_INTERVAL_SECONDS = env.float("OUTBOX_RELAY_INTERVAL_SECONDS", default=1.0)
# Relay each commit's outbox rows from the committing process at once (a thread of its own); off, only
# the relay loop of `manage.py consume` sends them (docs/events.md).
OUTBOX_RELAY_AFTER_COMMIT = env.bool("OUTBOX_RELAY_AFTER_COMMIT", default=True)
OUTBOX_RETENTION_HOURS = env.int("OUTBOX_RETENTION_HOURS", default=24)
# How long a consumer's record of a handled (or parked) message is kept: as long as the broker may
# deliver it again, i.e. at least the retention of every consumed topic (Kafka's default log
# retention is 7 days, 168 h). Pruned hourly by merchant_platform.messaging.prune_processed_messages.
PROCESSED_MESSAGE_RETENTION_HOURS = env.int("PROCESSED_MESSAGE_RETENTION_HOURS", default=168)
CDC_SLOT_NAME = env.str("CDC_SLOT_NAME", default="")
CDC_SNAPSHOT_MODE = env.str("CDC_SNAPSHOT_MODE", default="initial")
CDC_MAX_LAG_BYTES = env.int("CDC_MAX_LAG_BYTES", default=256 * 1024 * 1024)
# How long the relay waits once it has caught up before asking the slot again: the floor of every
# change stream's latency (commerce's search index, inventory's items), against one cheap query per wait.
CDC_POLL_INTERVAL_SECONDS = env.float("CDC_POLL_INTERVAL_SECONDS", default=0.2)
CDC_METRICS_PORT = env.int("CDC_METRICS_PORT", default=0)
# A task whose worker died unacknowledged is redelivered after this many seconds (Redis broker).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT_SECONDS", default=3600)}
