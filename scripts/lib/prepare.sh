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

# Development credentials (issue 22 item 4): under APP_ENV=development (the default), the random
# Django secret key, application secret and service accounts' passwords, and licensing's Ed25519 certificate
# pair, made once in var/dev/ (DEV_CREDENTIALS_DIR) and read from there by every command's settings
# (settings/development.py). Made here first so the processes started next find them. Every other
# APP_ENV sets its own (docs/configuration.md).
ensure_dev_credentials() {
    [[ ${APP_ENV:-development} == development ]] || return 0
    (cd "$ROOT_DIR" && DJANGO_SETTINGS_MODULE=settings "$PYTHON" -c 'import settings' >/dev/null) \
        || die "could not prepare the development credentials in ${DEV_CREDENTIALS_DIR:-$VAR_DIR/dev}"
}
