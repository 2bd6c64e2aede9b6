# The preparation shared by scripts/run and scripts/test: everything up to (not including) the
# platform's own servers. Idempotent: each step checks before it acts.

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
source "$(dirname "${BASH_SOURCE[0]}")/packages.sh"
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"
source "$(dirname "${BASH_SOURCE[0]}")/redis.sh"
source "$(dirname "${BASH_SOURCE[0]}")/components.sh"

prepare_components() {
    ensure_venv
    ensure_debian_packages
    ensure_postgres
    ensure_redis
    ensure_broker
    ensure_object_storage
}

manage() {
    "$PYTHON" "$ROOT_DIR/manage.py" "$@"
}

# Create the databases, migrate every alias, run the seeds and create the Kafka topics (all idempotent).
prepare_database() {
    ensure_databases
    say "migrating and seeding"
    # Development signing key of identity first: every process that starts checks identity has one
    # (production mounts its own; see docs/services/identity.md).
    manage generate_signing_key --if-missing >/dev/null || die "manage.py generate_signing_key failed"
    manage migrate --noinput -v0 || die "manage.py migrate failed"
    manage seed >/dev/null || die "manage.py seed failed"
    manage create_topics >/dev/null || die "manage.py create_topics failed"
}
