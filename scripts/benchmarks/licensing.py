"""Target `licensing`: validation throughput, and the cost of reading a license certificate.

(a) POST /licenses/{id}/actions/validate over 1,000 licenses in turn, each for the fingerprint that
    holds its seat (the steady state of a fleet of tills re-validating), 32 connections, through the
    nginx gateway to the all-in-one WSGI server, authenticated as a platform service (HTTP Basic);
(b) the same by key (POST /licenses/actions/validate-key); and (a) straight to the WSGI server, to
    show the gateway's share;
(c) the kernel reader: verify the Ed25519 signature and open the AES-256-GCM seal of a certificate it
    has not seen before (merchant_platform.licenses.verify_and_open), per call, in this process;
(d) the same for a certificate the process verified before (open_certificate remembers verified
    texts; certExpiresAt is still checked);
(e) the whole reader as consumers call it, Redis GET included (merchant_platform.licenses.read_license).
Targets (issue 6): (a) at least 500 validations/s; (c) under 0.2 ms per call.

The licenses (a policy BENCH_VALIDATE with 1,000 licenses and one seat each) are created once in the
bench database and kept between runs. The certificate keys are generated per run.
"""

from __future__ import annotations

import json
import time

from benchmarks.framework import PLATFORM_WSGI, PLATFORM_WSGI_APP, Context, Request, bench_service_header

LICENSES = 1_000
CONNECTIONS = 32
POLICY_CODE = "BENCH_VALIDATE"
READER_CALLS = 5_000
MIN_VALIDATE_RPS = 500
MAX_READER_MS = 0.2


def signing_env() -> dict[str, str]:
    from merchant_platform.licenses import pem_pair

    private, public = pem_pair()
    return {"APP_ENV_LICENSING_ED25519_PRIVATE_KEY": private, "APP_ENV_LICENSING_ED25519_PUBLIC_KEY": public}


def bench_licenses() -> list[tuple[int, str, str]]:
    """(license id, key, fingerprint) of the bench licenses, created on first use."""
    from django.db import connections, transaction

    from apps.licensing.models import Activation, License, Policy
    from apps.licensing.states import LicenseStatus

    with transaction.atomic(using="licensing"):
        policy, _ = Policy.objects.get_or_create(code=POLICY_CODE, defaults={"name": "Bench", "activation_limit": 2})
        existing = License.objects.filter(policy=policy).count()
        if existing < LICENSES:
            licenses = License.objects.bulk_create(
                License(
                    owner_id=1,
                    policy=policy,
                    name=f"bench {index}",
                    status=LicenseStatus.ACTIVATED,
                    activation_config={"limit": 2},
                )
                for index in range(existing, LICENSES)
            )
            Activation.objects.bulk_create(Activation(license=license, fingerprint=f"till-{license.id}") for license in licenses)
    rows = list(License.objects.filter(policy=policy).order_by("id").values_list("id", "key")[:LICENSES])
    connections.close_all()
    return [(license_id, key, f"till-{license_id}") for license_id, key in rows]


def validate_requests(licenses, headers: dict[str, str], *, by_key: bool) -> list[Request]:
    header_items = tuple({**headers, "Content-Type": "application/json"}.items())
    if by_key:
        return [
            Request(
                "/v1/api/licensing/licenses/actions/validate-key",
                "POST",
                json.dumps({"key": key, "fingerprint": fingerprint}),
                header_items,
            )
            for _, key, fingerprint in licenses
        ]
    return [
        Request(f"/v1/api/licensing/licenses/{license_id}/actions/validate", "POST", json.dumps({"fingerprint": fingerprint}), header_items)
        for license_id, _, fingerprint in licenses
    ]


def reader_costs(ctx: Context, license_id: int) -> tuple[float, list[dict]]:
    """Milliseconds per cold verify-and-open call, and the recorded results of (c), (d) and (e)."""
    from apps.licensing.certificates import certificate_publish, sign_certificate
    from merchant_platform import licenses

    certificate = certificate_publish(license_id)
    if certificate is None or licenses.open_certificate(certificate, license_id=license_id) is None:
        raise RuntimeError("the bench certificate cannot be published and opened; check the signing keys")
    payload = licenses.open_certificate(certificate)
    distinct = [sign_certificate({**payload, "issuedAt": f"bench-{index}"}) for index in range(READER_CALLS)]
    public_key = licenses.verifying_key()
    started = time.perf_counter()
    for text in distinct:
        licenses.verify_and_open(text, public_key=public_key)
    cold_ms = (time.perf_counter() - started) * 1000 / READER_CALLS
    started = time.perf_counter()
    for _ in range(READER_CALLS):
        licenses.open_certificate(certificate, license_id=license_id)
    warm_ms = (time.perf_counter() - started) * 1000 / READER_CALLS
    started = time.perf_counter()
    for _ in range(READER_CALLS):
        licenses.read_license(license_id)
    read_ms = (time.perf_counter() - started) * 1000 / READER_CALLS
    return cold_ms, [
        ctx.record("(c) reader: verify and open a new certificate, per call", value=f"{cold_ms:.3f} ms", calls=READER_CALLS),
        ctx.record("(d) reader: a certificate it verified before, per call", value=f"{warm_ms:.3f} ms", calls=READER_CALLS),
        ctx.record("(e) read_license: Redis GET + (d), per call", value=f"{read_ms:.3f} ms", calls=READER_CALLS),
    ]


def run(ctx: Context) -> list[dict]:
    keys = signing_env()
    ctx.env.update(keys)
    ctx.django()

    licenses = bench_licenses()
    headers = {"Authorization": bench_service_header(ctx)}
    results = []
    server = PLATFORM_WSGI.label
    with ctx.server(PLATFORM_WSGI, PLATFORM_WSGI_APP, env=keys) as wsgi_url:
        with ctx.gateway(wsgi_url) as url:
            validate = ctx.load(
                f"(a) validate by id, {len(licenses)} licenses",
                url,
                requests=validate_requests(licenses, headers, by_key=False),
                connections=CONNECTIONS,
                server=f"nginx + {server}",
            )
            results.append(validate)
            results.append(
                ctx.load(
                    f"(b) validate by key, {len(licenses)} licenses",
                    url,
                    requests=validate_requests(licenses, headers, by_key=True),
                    connections=CONNECTIONS,
                    server=f"nginx + {server}",
                )
            )
        results.append(
            ctx.load(
                "(a) without the gateway",
                wsgi_url,
                requests=validate_requests(licenses, headers, by_key=False),
                connections=CONNECTIONS,
                server=server,
            )
        )
    open_ms, reader_results = reader_costs(ctx, licenses[0][0])
    results += reader_results
    failed = sum(result["errors"] + result["non_2xx"] for result in results if "errors" in result)
    results.append(
        ctx.record(f"check: (a) >= {MIN_VALIDATE_RPS} validations/s", value=validate["rps"], passed=validate["rps"] >= MIN_VALIDATE_RPS)
    )
    results.append(ctx.record(f"check: (c) < {MAX_READER_MS} ms", value=f"{open_ms:.3f} ms", passed=open_ms < MAX_READER_MS))
    results.append(ctx.record(f"check: no failed request at {CONNECTIONS} connections", value=failed, passed=failed == 0))
    return results
