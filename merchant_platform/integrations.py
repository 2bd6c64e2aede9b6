"""Provider integrations (spec 2.1 Configuration, group INTEGRATION; PaymentIntegration): how a
credential is sealed at rest, and the reader other services (payment) use to get a merchant's
integration with its credential in clear. The records live in the shared `public` schema, so the
reader needs no service import; commerce owns the writes (apps/commerce/services/integrations.py).

A credential is AES-256-GCM ciphertext under APP_ENV_APPLICATION_SECRET (merchant_platform.crypto),
bound to its record's id: a ciphertext copied onto another record does not open. With another
secret, opening it logs `decrypt failed` and raises `crypto.DecryptionFailed` (code DECRYPT_FAILED,
spec 7): the provider call that needed it fails, the process does not."""

from __future__ import annotations

from dataclasses import dataclass, field

from merchant_platform import crypto
from merchant_platform.errors import NotFound
from merchant_platform.models import Configuration

DB = "default"


def seal_credential(*, configuration_id: int, credential: str) -> tuple[str, str]:
    """The ciphertext to store for `credential` on record `configuration_id`, and its display mask."""
    sealed = crypto.encrypt(credential, purpose=Configuration.CREDENTIAL_PURPOSE, associated_data=str(configuration_id).encode())
    return sealed, crypto.mask(credential)


def open_credential(configuration: Configuration) -> str:
    """The credential of `configuration` in clear ("" when none is stored); DecryptionFailed when it
    was sealed under another secret or tampered with."""
    if not configuration.credential:
        return ""
    return crypto.decrypt(
        configuration.credential, purpose=Configuration.CREDENTIAL_PURPOSE, associated_data=str(configuration.id).encode()
    )


@dataclass(frozen=True)
class MerchantIntegration:
    id: int
    merchant_id: int
    code: str
    environment: str
    settings: dict
    credential: str = field(repr=False)  # never printed, never logged


def merchant_integration(*, merchant_id: int, code: str, environment: str) -> MerchantIntegration:
    """A merchant's ACTIVE integration with provider `code` in `environment`, credential opened.
    NotFound (INTEGRATION_NOT_FOUND) when there is none; DecryptionFailed when the credential does
    not open with this process's secret."""
    try:  # one alive row at most (configuration_unique_alive): get(), which compiles no ORDER BY
        row = Configuration.objects.using(DB).get(
            group=Configuration.Group.INTEGRATION,
            principal_type=Configuration.PrincipalType.MERCHANT,
            principal_id=merchant_id,
            code=code,
            environment=environment,
            status=Configuration.Status.ACTIVE,
        )
    except Configuration.DoesNotExist:
        raise NotFound("The merchant has no active integration with this provider.", code="INTEGRATION_NOT_FOUND") from None
    return MerchantIntegration(
        id=row.id,
        merchant_id=merchant_id,
        code=row.code,
        environment=row.environment,
        settings=row.settings,
        credential=open_credential(row),
    )
