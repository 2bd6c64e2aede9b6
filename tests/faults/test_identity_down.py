"""Identity down (spec 7): a service process of its own (`APP_SERVICE=inventory manage.py serve`)
whose JWKS URL answers nothing still verifies a token issued before, with the key set a verifier
kept in Redis (merchant_platform.verification.jwks); a token signed by a key nobody published is
still refused."""

from __future__ import annotations

import pytest
import requests

from merchant_platform.verification.jwks import JWKSCache
from tests.support.auth import mint_token, new_signing_key, random_user_id, signing_key
from tests.support.ports import free_port, wait_for_port

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]


def test_a_service_verifies_existing_tokens_while_identity_is_down(spawn, subprocess_env):
    JWKSCache._store_shared_copy({"keys": [signing_key().public_jwk]})  # what a verifier that fetched it stored
    port = free_port()
    spawn(
        "manage.py",
        "serve",
        "--roles",
        "web",
        env=subprocess_env(
            APP_SERVICE="inventory", WSGI_PORT=str(port), WEB_CONCURRENCY="1", IDENTITY_JWKS_URL=f"http://127.0.0.1:{free_port()}/jw-certs"
        ),
        name="inventory",
    )
    wait_for_port(port, seconds=60)
    url = f"http://127.0.0.1:{port}/v1/api/inventory/items"
    verified = requests.get(url, headers={"Authorization": f"Bearer {mint_token(random_user_id())}"}, timeout=30)
    assert verified.status_code in (200, 403), verified.text  # authenticated; what it may see is another matter
    assert not verified.json().get("code", "").startswith("TOKEN_")
    stranger = mint_token(random_user_id(), key=new_signing_key())
    refused = requests.get(url, headers={"Authorization": f"Bearer {stranger}"}, timeout=30)
    assert refused.status_code == 401
