"""Verification of the callers of every service, without DRF (the DRF classes that use it are in
merchant_platform.authentication_classes; the WebSocket handshake calls it directly).

- `jwks`: identity's key set (JWKS, `/jw-certs`), cached per process and, with an HMAC, in Redis.
- `tokens`: ES256 access tokens (`verify_access_token`, `TokenUser`, the claims identity signs).
- `service_accounts`: HTTP Basic accounts of the service-to-service calls (`service_principal`,
  `basic_auth_header`).
"""
