# Redis: the machine's server, started the way the machine starts it when it does not answer.

REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}

redis_answers() {
    timeout 2 bash -c '
        exec 3<>"/dev/tcp/$1/$2" || exit 1
        printf "PING\r\n" >&3
        read -r reply <&3
        [[ $reply == +PONG* || $reply == -NOAUTH* ]]' _ "$1" "$2" 2>/dev/null
}

ensure_redis() {
    local host port
    read -r host port < <(url_host_port "$REDIS_URL" 6379)
    redis_answers "$host" "$port" && return
    is_local_host "$host" || die "Redis at $host:$port (REDIS_URL) is not answering"
    command -v redis-server >/dev/null || die "Redis is not answering on $host:$port and redis-server is not installed"
    say "starting Redis on port $port"
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$port" --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null || die "redis-server did not start"
    local deadline=$((SECONDS + 30))
    until redis_answers "$host" "$port"; do
        ((SECONDS < deadline)) || die "Redis did not answer on $host:$port within 30s (log: /var/log/redis/ci.log)"
        sleep 0.2
    done
}
