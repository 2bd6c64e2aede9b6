# The virtual environment: created when missing; requirements installed only when the requirement
# files changed since the last install (a hash stamp kept inside .venv).

REQUIREMENTS_STAMP="$VENV_DIR/.requirements.sha256"

find_python() {
    local candidate
    for candidate in ${PYTHON_FOR_VENV:-} python3.11 python3; do
        if command -v "$candidate" >/dev/null &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return
        fi
    done
    die "Python 3.11 or newer is needed (set PYTHON_FOR_VENV to its path)"
}

requirements_hash() {
    cat "$ROOT_DIR/requirements.txt" "$ROOT_DIR/requirements-dev.txt" | sha256sum | cut -d' ' -f1
}

ensure_venv() {
    if [[ ! -x $PYTHON ]]; then
        local python
        python=$(find_python)
        say "creating the virtual environment in .venv ($("$python" --version))"
        "$python" -m venv "$VENV_DIR" || die "could not create .venv (is the venv module installed? Debian: python3-venv)"
    fi
    local wanted
    wanted=$(requirements_hash)
    if [[ -f $REQUIREMENTS_STAMP && $(<"$REQUIREMENTS_STAMP") == "$wanted" ]]; then
        return
    fi
    say "installing requirements.txt and requirements-dev.txt into .venv"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check -r "$ROOT_DIR/requirements-dev.txt" ||
        die "pip could not install the requirements (see the output above)"
    echo "$wanted" >"$REQUIREMENTS_STAMP"
}
