# Shared by scripts/run and scripts/test: paths, messages, port checks and the processes a script
# started itself (which it stops again on exit; what it found running it leaves alone).

ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VAR_DIR="$ROOT_DIR/var"
LOG_DIR="$VAR_DIR/log"
RUN_DIR="$VAR_DIR/run"
VENV_DIR="$ROOT_DIR/.venv"
PYTHON="$VENV_DIR/bin/python"

mkdir -p "$LOG_DIR" "$RUN_DIR"

say() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# Run a command as root: directly when we are root, else through sudo when it is there.
as_root() {
    if is_root; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "'$*' needs root and sudo is not installed"
    fi
}

# "host port" of a URL such as postgres://user@host:5432/db or redis://host:6379/0.
url_host_port() {
    local url=$1 default_port=$2
    local rest=${url#*://}
    rest=${rest%%/*}
    rest=${rest##*@}
    local host=${rest%:*} port=${rest##*:}
    [[ $rest == *:* ]] || { host=$rest port=$default_port; }
    host=${host#[}
    host=${host%]}
    printf '%s %s\n' "${host:-127.0.0.1}" "$port"
}

is_local_host() { [[ $1 == 127.0.0.1 || $1 == localhost || $1 == ::1 ]]; }

port_answers() {
    timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# Wait (bounded) until host:port accepts connections; a component that does not come up is a
# one-line error naming it.
wait_for_port() {
    local name=$1 host=$2 port=$3 seconds=$4 log=${5:-}
    local deadline=$((SECONDS + seconds))
    until port_answers "$host" "$port"; do
        if ((SECONDS >= deadline)); then
            die "$name did not answer on $host:$port within ${seconds}s${log:+ (log: $log)}"
        fi
        sleep 0.2
    done
}

STARTED_NAMES=()
STARTED_PIDS=()
STARTED_STOP_SECONDS=()

# Start a long-running component in its own session (so a Ctrl-C on the terminal reaches only
# us, and we stop it in order), with its output in var/log/<name>.log. It gets stop_seconds to
# exit on SIGTERM before it is killed.
start_background() {
    local name=$1 stop_seconds=$2
    shift 2
    local log="$LOG_DIR/$name.log"
    setsid "$@" >>"$log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$RUN_DIR/$name.pid"
    STARTED_NAMES+=("$name")
    STARTED_PIDS+=("$pid")
    STARTED_STOP_SECONDS+=("$stop_seconds")
    say "started $name (pid $pid, log ${log#"$ROOT_DIR"/})"
}

# Stop what this script started, newest first: SIGTERM, then SIGKILL after a bounded wait.
stop_started() {
    local i pid name deadline
    for ((i = ${#STARTED_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${STARTED_PIDS[i]}
        name=${STARTED_NAMES[i]}
        kill -0 "$pid" 2>/dev/null || continue
        # The component leads its own process group (setsid): signal the group, helpers included.
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        deadline=$((SECONDS + STARTED_STOP_SECONDS[i]))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
        rm -f "$RUN_DIR/$name.pid"
        say "stopped $name"
    done
    STARTED_NAMES=()
    STARTED_PIDS=()
    STARTED_STOP_SECONDS=()
}
