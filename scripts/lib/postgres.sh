# PostgreSQL: started when down (local server only), configured for CDC (logical decoding) and
# enough connections, and the databases of DATABASE_URL and every <SERVICE>_DATABASE_URL created.

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/merchant_platform}
PG_CLUSTER=${PG_CLUSTER:-main}
PG_CONF_FILE=/etc/postgresql/$PG_VERSION/$PG_CLUSTER/conf.d/merchant-platform.conf

# The server's maintenance database, reached with the credentials of DATABASE_URL.
maintenance_url() {
    local url=${1%%\?*}
    printf '%s/postgres\n' "${url%/*}"
}

database_name() {
    local url=${1%%\?*}
    printf '%s\n' "${url##*/}"
}

pg_query() {
    psql "$(maintenance_url "$DATABASE_URL")" -XAtq -v ON_ERROR_STOP=1 -c "$1"
}

pg_answers() {
    local host port
    read -r host port < <(url_host_port "$DATABASE_URL" 5432)
    pg_isready -q -h "$host" -p "$port" -t 2
}

start_local_postgres() {
    [[ -n $PG_VERSION ]] || die "PostgreSQL is not installed (no cluster under /etc/postgresql)"
    say "starting PostgreSQL $PG_VERSION"
    as_root pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" "$PG_CLUSTER" start >/dev/null ||
        die "PostgreSQL $PG_VERSION did not start (see /var/log/postgresql/)"
}

wait_for_postgres() {
    local deadline=$((SECONDS + 60))
    until pg_answers; do
        ((SECONDS < deadline)) || die "PostgreSQL did not answer at $(url_host_port "$DATABASE_URL" 5432) within 60s"
        sleep 0.5
    done
}

# True when the running server already has every setting CDC and the platform need (changing
# any of them takes a restart).
pg_settings_ok() {
    [[ $(pg_query 'SHOW wal_level') == logical ]] &&
        (($(pg_query 'SHOW max_replication_slots') >= 20)) &&
        (($(pg_query 'SHOW max_wal_senders') >= 20)) &&
        (($(pg_query 'SHOW max_connections') >= 400))
}

# Servers that restrict logical decoding to approved output plugins (output_plugin_libraries)
# must approve wal2json too; empty output when the server has no such setting.
pg_plugin_libraries() {
    pg_query "SELECT setting FROM pg_settings WHERE name = 'output_plugin_libraries'"
}

pg_plugins_ok() {
    local libraries
    libraries=$(pg_plugin_libraries)
    [[ -z $libraries || ,${libraries// /}, == *,wal2json,* ]]
}

# Write the settings, then restart (or only reload, when just the plugin list changes), but only
# when the running server lacks one of them.
ensure_pg_settings() {
    local restart=0 libraries
    pg_settings_ok || restart=1
    if ((!restart)) && pg_plugins_ok; then
        return
    fi
    libraries=$(pg_plugin_libraries)
    say "configuring PostgreSQL for logical decoding ($PG_CONF_FILE)"
    {
        echo "# Written by scripts/run and scripts/test of Merchant Platform: logical decoding for the"
        echo "# CDC relay and room for every service's connection pool."
        echo "wal_level = logical"
        echo "max_replication_slots = 20"
        echo "max_wal_senders = 20"
        echo "max_connections = 400"
        if [[ -n $libraries ]]; then
            [[ ,${libraries// /}, == *,wal2json,* ]] || libraries="$libraries, wal2json"
            echo "output_plugin_libraries = '$libraries'"
        fi
    } | as_root tee "$PG_CONF_FILE" >/dev/null
    if ((restart)); then
        say "restarting PostgreSQL $PG_VERSION for wal_level and its limits"
        as_root pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" "$PG_CLUSTER" restart >/dev/null ||
            die "PostgreSQL $PG_VERSION did not restart (see /var/log/postgresql/)"
        wait_for_postgres
    else
        as_root pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" "$PG_CLUSTER" reload >/dev/null ||
            die "PostgreSQL $PG_VERSION did not reload its configuration"
        local deadline=$((SECONDS + 10))  # a reload takes effect asynchronously
        until pg_plugins_ok || ((SECONDS >= deadline)); do
            sleep 0.2
        done
    fi
    pg_settings_ok && pg_plugins_ok || die "PostgreSQL ignored $PG_CONF_FILE (is conf.d included by postgresql.conf?)"
}

ensure_postgres() {
    local host port
    read -r host port < <(url_host_port "$DATABASE_URL" 5432)
    command -v psql >/dev/null || die "the PostgreSQL client (psql) is not installed"
    if ! pg_answers; then
        is_local_host "$host" || die "PostgreSQL at $host:$port (DATABASE_URL) is not answering"
        start_local_postgres
        wait_for_postgres
    fi
    pg_query 'SELECT 1' >/dev/null || die "PostgreSQL at $host:$port refused the credentials of DATABASE_URL"
    if is_local_host "$host"; then
        ensure_pg_settings
    else
        pg_settings_ok || die "PostgreSQL at $host:$port needs wal_level=logical, max_replication_slots>=20, max_wal_senders>=20, max_connections>=400"
    fi
}

# Create the database of DATABASE_URL and of every <SERVICE>_DATABASE_URL override when missing.
ensure_databases() {
    local name url database
    for name in DATABASE_URL $(compgen -e | grep -E '^[A-Z]+_DATABASE_URL$' || true); do
        url=${!name}
        database=$(database_name "$url")
        [[ $database =~ ^[A-Za-z0-9_]+$ ]] || die "$name names an unsupported database name '$database'"
        if [[ -z $(psql "$(maintenance_url "$url")" -XAtq -c "SELECT 1 FROM pg_database WHERE datname = '$database'") ]]; then
            say "creating database $database"
            psql "$(maintenance_url "$url")" -XAtq -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$database\"" ||
                die "could not create database $database ($name)"
        fi
    done
}
