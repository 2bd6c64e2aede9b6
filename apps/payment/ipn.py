"""The provider IPN signature (spec 5): every field but prov_SecureHash, sorted by name, joined as
`name=value` with `&`, HMAC-SHA512 under the provider secret, upper-case hex; compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

HASH_FIELD = "prov_SecureHash"


def canonical(fields: dict) -> str:
    return "&".join(f"{name}={fields[name]}" for name in sorted(fields) if name != HASH_FIELD)


def sign(fields: dict, secret: str) -> str:
    return hmac.new(secret.encode(), canonical(fields).encode(), hashlib.sha512).hexdigest().upper()


def verify(fields: dict, secret: str) -> bool:
    given = fields.get(HASH_FIELD)
    if not isinstance(given, str) or not secret:
        return False
    return hmac.compare_digest(sign(fields, secret).encode(), given.encode())
