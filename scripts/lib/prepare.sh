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

# Development certificate keys of licensing (spec 7): an Ed25519 pair made once in var/dev/ and
# exported, when the environment names neither key and APP_ENV is not production (production sets
# its own; docs/configuration.md). Without them licensing publishes no certificates.
ensure_dev_license_keys() {
    local key_file=${1:-$VAR_DIR/dev/licensing-ed25519.pem}
    if [[ -n ${APP_ENV_LICENSING_ED25519_PRIVATE_KEY:-}${APP_ENV_LICENSING_ED25519_PUBLIC_KEY:-} || ${APP_ENV:-development} == production ]]; then
        return 0
    fi
    local keys
    # One line each: settings/licensing.py turns the "\n" sequences back into newlines.
    keys=$(cd "$ROOT_DIR" && "$PYTHON" -c '
import sys
from merchant_platform.licenses import development_pem_pair
print(*(pem.strip().replace("\n", "\\n") for pem in development_pem_pair(sys.argv[1])), sep="\n")
' "$key_file"
    ) || die "could not prepare the development licensing keys in $key_file"
    export APP_ENV_LICENSING_ED25519_PRIVATE_KEY=${keys%%$'\n'*}
    export APP_ENV_LICENSING_ED25519_PUBLIC_KEY=${keys#*$'\n'}
}
