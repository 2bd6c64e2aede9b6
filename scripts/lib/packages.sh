# Debian packages the platform needs beyond what the machine ships: the gateway (nginx), the
# PostgreSQL logical-decoding plugin for CDC (wal2json), the load generator of scripts/bench (wrk) and
# the headless browser signal's browser-client test drives (chromium).

PG_VERSION=${PG_VERSION:-$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1)}

package_installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

ensure_debian_packages() {
    command -v dpkg-query >/dev/null || {
        say "not a Debian system: install nginx, wal2json, wrk and chromium yourself"
        return
    }
    local wanted=(nginx wrk chromium)
    [[ -n $PG_VERSION ]] && wanted+=("postgresql-$PG_VERSION-wal2json")
    local missing=() package
    for package in "${wanted[@]}"; do
        package_installed "$package" || missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq >/dev/null || die "apt-get update failed"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get could not install: ${missing[*]}"
}
