"""Licensing: certificate signing and verification keys, certificate lifetime (spec 2.4, 5 and 8).

Every process reads the public key (any service may verify certificates through
merchant_platform.licenses); only licensing needs the private key. PEM text may carry literal
"\\n" sequences (one-line environment values); they are turned back into newlines. Under
APP_ENV=development, when neither key is set, every process uses the development pair made once in
var/dev/licensing-ed25519.pem (settings.development), whichever command it runs.
"""

from merchant_platform.registry import SERVICE_APPS
from settings.env import APP_ENV, env, refuse_to_start


def _pem(name: str) -> str:
    return env.str(name, default="").replace("\\n", "\n").strip()


APP_ENV_LICENSING_ED25519_PRIVATE_KEY = _pem("APP_ENV_LICENSING_ED25519_PRIVATE_KEY")
APP_ENV_LICENSING_ED25519_PUBLIC_KEY = _pem("APP_ENV_LICENSING_ED25519_PUBLIC_KEY")
if APP_ENV == "development" and not (APP_ENV_LICENSING_ED25519_PRIVATE_KEY or APP_ENV_LICENSING_ED25519_PUBLIC_KEY):
    from settings.development import development_license_pems

    APP_ENV_LICENSING_ED25519_PRIVATE_KEY, APP_ENV_LICENSING_ED25519_PUBLIC_KEY = development_license_pems()
# Upper bound of a certificate's certExpiresAt and of its Redis cache expiry.
APP_ENV_LICENSING_CERT_TTL_SECONDS = env.int("APP_ENV_LICENSING_CERT_TTL_SECONDS", default=3600)
if APP_ENV_LICENSING_CERT_TTL_SECONDS <= 0:
    raise SystemExit(f"merchant-platform: APP_ENV_LICENSING_CERT_TTL_SECONDS must be positive, got {APP_ENV_LICENSING_CERT_TTL_SECONDS}")
# How long validate's lastValidatedAt updates wait to be written together, in the background.
LICENSING_LAST_VALIDATED_FLUSH_SECONDS = env.float("LICENSING_LAST_VALIDATED_FLUSH_SECONDS", default=0.2)
# How often Celery beat publishes the certificates whose after-commit publication failed (Redis down).
LICENSING_CERTIFICATE_SWEEP_SECONDS = env.float("LICENSING_CERTIFICATE_SWEEP_SECONDS", default=30.0)

# The license gate of each service (spec 2.4 and 7; docs/services/licensing.md, "The license gate"):
# `<SERVICE>_LICENSE_GATE` is off (the default: the request's license is only read), warn (a request
# without a license in force is served and logged) or enforce (it is refused with a 403).
LICENSE_GATE_MODES = ("off", "warn", "enforce")
LICENSE_GATES = {name: env.str(f"{name.upper()}_LICENSE_GATE", default="off").lower() for name in SERVICE_APPS}
for _name, _mode in LICENSE_GATES.items():
    if _mode not in LICENSE_GATE_MODES:
        refuse_to_start(f"{_name.upper()}_LICENSE_GATE must be one of {', '.join(LICENSE_GATE_MODES)}, got {_mode!r}")
