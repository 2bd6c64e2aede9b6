"""Target `identity`: what authentication costs per request, and sign-in throughput, in one run.

(a) GET /bench/identity/users/<id>: the current-user read without authentication (same selector and
    serializer as /users/me, bench-only route);
(b) GET /v1/api/identity/users/me with a Bearer token: the same read plus ES256 verification
    (kid lookup in the process's key cache, signature, exp/iss/aud);
(c) GET /v1/api/identity/users/<id> as an ADMIN: (b) plus the policy layer (the grants read from
    Redis, two round trips, and the queryset scope);
(d) POST /v1/api/identity/auth/sign-in with the right password: argon2id verification at the
    configured parameters (IDENTITY_ARGON2_*), one refresh-token INSERT and one ES256 signature.
All against the all-in-one WSGI server (framework.PLATFORM_WSGI) without the gateway, so the figures
compare the application's work only. A client presents one token for up to 15 minutes, so after its
first request each process finds the token among the ones it verified (authentication.VerifiedTokens):
(b) and (c) measure that steady state. In this process, per call:
(e) verify_access_token for a token never seen (header, ES256 signature, claims);
(f) verify_access_token for a token verified before;
(g) the policy decision of one request: a user's grants read from Redis (one round trip) and the
    queryset scoped for a user holding a permission in one merchant.
Target (issue 4): (b) keeps at least 85% of (a)'s throughput (authentication costs at most 15%).
"""

from __future__ import annotations

import json

from benchmarks.framework import PLATFORM_WSGI, PLATFORM_WSGI_APP, Context

MAX_AUTH_COST = 0.15
VERIFY_CALLS = 2_000
SIGN_IN_CONNECTIONS = 8
EMAIL = "bench-identity@example.com"
PASSWORD = "bench password for identity"


def bench_user() -> tuple[int, str]:
    """The bench account (created once, kept between runs) and an access token of an ADMIN."""
    from django.db import connections
    from django.utils import timezone

    from apps.identity import identifiers, selectors, services, tokens
    from apps.identity.models import User
    from merchant_platform.authorization import policy_grant_role

    user = selectors.user_by_identifier(identifiers.EMAIL, EMAIL)
    if user is None:
        user = services.user_sign_up(email=EMAIL, password=PASSWORD).user
    if user.email_verified_at is None:  # an unverified email does not sign in; the bench stands for a verified one
        User.objects.using("identity").filter(pk=user.pk).update(email_verified_at=timezone.now())
    policy_grant_role(user_id=user.pk, role="ADMIN")
    token, _ = tokens.issue_access_token(user.pk)
    connections.close_all()
    return user.pk, token


def verification_cost(ctx: Context, token_for, calls: int = VERIFY_CALLS) -> list[dict]:
    import time

    from merchant_platform.authentication import verified_tokens, verify_access_token

    tokens = [token_for() for _ in range(calls)]
    started = time.perf_counter()
    for token in tokens:
        verify_access_token(token)
    fresh = time.perf_counter() - started
    started = time.perf_counter()
    for token in tokens:
        verify_access_token(token)
    remembered = time.perf_counter() - started
    verified_tokens.clear()
    return [
        ctx.rate(
            "(e) verify_access_token, new token (ES256 verified)",
            calls,
            fresh,
            unit="verifications/s",
            us_per_call=round(fresh / calls * 1e6),
        ),
        ctx.rate(
            "(f) verify_access_token, token seen before",
            calls,
            remembered,
            unit="verifications/s",
            us_per_call=round(remembered / calls * 1e6),
        ),
    ]


def policy_cost(ctx: Context, calls: int = VERIFY_CALLS) -> dict:
    import time

    from apps.identity.models import User
    from merchant_platform.authentication import TokenUser
    from merchant_platform.authorization import grants_for, policy_grant_permission, policy_join_domain, scope_queryset

    member = 9_000_000_001
    policy_join_domain(user_id=member, domain=77)
    policy_grant_permission(user_id=member, resource="identity.User", action="read", domain=77)
    grants_for(member)  # cached from here on
    started = time.perf_counter()
    for _ in range(calls):
        scope_queryset(User.objects.all(), TokenUser(id=member, claims={}), "identity.User", tenant_field="id")
    seconds = time.perf_counter() - started
    return ctx.rate(
        "(g) policy decision: grants from Redis + queryset scope",
        calls,
        seconds,
        unit="decisions/s",
        us_per_call=round(seconds / calls * 1e6),
    )


def run(ctx: Context) -> list[dict]:
    ctx.manage("generate_signing_key", "--if-missing")
    ctx.django()
    from django.conf import settings

    user_id, token = bench_user()
    auth = {"Authorization": f"Bearer {token}"}
    spec = PLATFORM_WSGI
    with ctx.server(spec, PLATFORM_WSGI_APP, settings_module="benchmarks.identity_settings") as url:
        bare = ctx.load("(a) current-user read, no authentication", f"{url}/bench/identity/users/{user_id}", server=spec.label)
        verified = ctx.load("(b) GET /users/me, ES256 token verified", f"{url}/v1/api/identity/users/me", headers=auth, server=spec.label)
        authorized = ctx.load(
            "(c) GET /users/<id>, token + policy layer (ADMIN)", f"{url}/v1/api/identity/users/{user_id}", headers=auth, server=spec.label
        )
        sign_in = ctx.load(
            "(d) POST /auth/sign-in (argon2id "
            f"m={settings.IDENTITY_ARGON2_MEMORY_COST_KIB} KiB, t={settings.IDENTITY_ARGON2_TIME_COST}, "
            f"p={settings.IDENTITY_ARGON2_PARALLELISM})",
            f"{url}/v1/api/identity/auth/sign-in",
            method="POST",
            body=json.dumps({"identifier": EMAIL, "password": PASSWORD}),
            headers={"Content-Type": "application/json"},
            connections=SIGN_IN_CONNECTIONS,
            server=spec.label,
        )
        loads = [bare, verified, authorized, sign_in]
    from apps.identity import tokens

    results = [*loads, *verification_cost(ctx, lambda: tokens.issue_access_token(user_id)[0]), policy_cost(ctx)]
    cost = 1 - verified["rps"] / bare["rps"]
    failed = sum(result["errors"] + result["non_2xx"] for result in loads)
    results.append(
        ctx.record(f"check: authentication costs <= {MAX_AUTH_COST:.0%} of (a)", value=f"{cost:.1%}", passed=cost <= MAX_AUTH_COST)
    )
    results.append(ctx.record("check: no failed request", value=failed, passed=failed == 0))
    return results
