"""Development credentials: random values made once in `var/dev/` (DEV_CREDENTIALS_DIR), so no two
machines share a password or key and none is written in the code (issue 22 item 4).

settings.env.secret() reads a missing secret from here under APP_ENV=development or test (the test
suite then pins fixed values in settings.test); settings.licensing reads the licensing key pair from
here under APP_ENV=development. Every command finds them, whoever started it; scripts/run and
scripts/test make them first (`python -c 'import settings'`). Each file is written whole, mode
0600, and processes that start together agree on one value: the first file linked into place wins.

Standard library and `cryptography` only: settings import this module before Django is set up.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)

ROOT_DIR = Path(__file__).resolve().parent.parent


def credentials_dir() -> Path:
    return Path(os.environ.get("DEV_CREDENTIALS_DIR") or ROOT_DIR / "var" / "dev")


def _file_once(path: Path, make: Callable[[], str]) -> str:
    """The text of `path`, written there first (mode 0600) from `make()` when missing."""
    if path.exists():
        return path.read_text()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write(make())
    try:
        # Never replaces: a value another process linked first stays (FileExistsError is that case).
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink()
    return path.read_text()


def development_secret(name: str) -> str:
    """The development value of the secret `name` (48 random bytes, URL-safe base64)."""
    return _file_once(credentials_dir() / "secrets" / name, lambda: secrets.token_urlsafe(48)).strip()


def development_license_pems() -> tuple[str, str]:
    """(private, public) PEM of the development certificate key of licensing (spec 7)."""

    def new_private_pem() -> str:
        return Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()

    private_pem = _file_once(credentials_dir() / "licensing-ed25519.pem", new_private_pem)
    key = load_pem_private_key(private_pem.encode(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise SystemExit(f"merchant-platform: {credentials_dir() / 'licensing-ed25519.pem'} is not an Ed25519 key")
    return private_pem.strip(), key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode().strip()
