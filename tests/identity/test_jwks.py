"""GET /jw-certs, key rotation, the keypair requirement, and verification by an independent library."""

from __future__ import annotations

import io
import json
import stat

import jwt
import pytest
import requests
from django.core.management import call_command

from apps.identity import keys
from merchant_platform.verification.jwks import JWKSCache
from tests.identity.conftest import API, sign_up
from tests.kernel.conftest import run_python

pytestmark = pytest.mark.django_db(databases="__all__")


def kid_of(token: str) -> str:
    return jwt.get_unverified_header(token)["kid"]


def test_jw_certs_publishes_public_ec_keys(client, key_dir):
    response = client.get("/jw-certs")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"keys"} and len(body["keys"]) == 1
    key = body["keys"][0]
    assert {key["kty"], key["crv"], key["alg"], key["use"]} == {"EC", "P-256", "ES256", "sig"}
    assert key["kid"] and "d" not in key  # never the private part
    assert client.get(f"{API}/jw-certs").status_code == 404  # outside the API base path only


def test_tokens_verify_with_pyjwts_jwks_client_against_the_live_endpoint(live_server, key_dir):
    """An independent verifier (PyJWT's PyJWKClient) fetches /jw-certs over HTTP and accepts our tokens."""
    response = requests.post(
        f"{live_server.url}{API}/auth/sign-up", json={"username": "independent", "password": "correct horse battery staple"}, timeout=10
    )
    assert response.status_code == 201, response.text
    token = response.json()["accessToken"]
    signing_key = jwt.PyJWKClient(f"{live_server.url}/jw-certs").get_signing_key_from_jwt(token)
    claims = jwt.decode(token, signing_key.key, algorithms=["ES256"], audience="merchant-platform", issuer="merchant-platform-identity")
    assert claims["sub"] == response.json()["user"]["id"]
    assert claims["exp"] - claims["nbf"] == 900 and 0 <= claims["iat"] - claims["nbf"] < 1  # iat keeps microseconds


def test_the_kernel_verifier_fetches_the_live_key_set_on_an_unknown_kid(live_server, key_dir, settings):
    token = requests.post(
        f"{live_server.url}{API}/auth/sign-up", json={"username": "fetched", "password": "correct horse battery staple"}, timeout=10
    ).json()["accessToken"]
    settings.IDENTITY_JWKS_URL = f"{live_server.url}/jw-certs"
    verifier = JWKSCache()  # a sister service's verifier: no local key ring, only HTTP
    assert verifier.key_for(kid_of(token)) is not None


def test_rotation_keeps_old_tokens_valid_and_new_tokens_carry_the_new_kid(client, key_dir, settings):
    old = sign_up(client, username="rotating")
    old_kid = kid_of(old["accessToken"])
    call_command("generate_signing_key", "--dir", str(key_dir), "--activate-in", "3600", stdout=io.StringIO())
    ring = keys.reload()
    upcoming = ring.keys[-1]
    # Published before it signs, so verifiers know it before the first token carries it.
    assert {k["kid"] for k in client.get("/jw-certs").json()["keys"]} == {old_kid, upcoming.kid}
    assert kid_of(sign_up(client, username="stillold")["accessToken"]) == old_kid
    # Once it is active it signs, and the old key keeps verifying until every token it signed expired.
    activated = upcoming.activates_at
    assert ring.signing_key(now=activated + 1).kid == upcoming.kid
    still = {k["kid"] for k in ring.jwks(now=activated + settings.IDENTITY_ACCESS_TOKEN_TTL_SECONDS)["keys"]}
    gone = {
        k["kid"] for k in ring.jwks(now=activated + settings.IDENTITY_ACCESS_TOKEN_TTL_SECONDS + settings.JWT_LEEWAY_SECONDS + 1)["keys"]
    }
    assert still == {old_kid, upcoming.kid}
    assert gone == {upcoming.kid}


def test_a_rotated_key_signs_new_tokens_and_old_tokens_still_verify(client, key_dir, settings):
    old = sign_up(client, username="beforerotation")
    (key_dir / next(key_dir.glob("*.pem")).name).rename(key_dir / "20200101T000000Z.pem")  # the old key, activated long ago
    call_command("generate_signing_key", "--dir", str(key_dir), stdout=io.StringIO())
    keys.reload()
    new = sign_up(client, username="afterrotation")
    assert kid_of(new["accessToken"]) != kid_of(old["accessToken"])
    for body in (old, new):
        assert client.get(f"{API}/users/me", HTTP_AUTHORIZATION=f"Bearer {body['accessToken']}").status_code == 200


def test_generate_signing_key_writes_a_private_file(tmp_path):
    out = io.StringIO()
    call_command("generate_signing_key", "--dir", str(tmp_path / "k"), stdout=out)
    (path,) = (tmp_path / "k").glob("*.pem")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert keys.KeyRing(tmp_path / "k").keys[0].kid in out.getvalue()
    call_command("generate_signing_key", "--dir", str(tmp_path / "k"), "--if-missing", stdout=io.StringIO())
    assert len(list((tmp_path / "k").glob("*.pem"))) == 1


def test_identity_refuses_to_start_without_a_keypair(tmp_path):
    empty = tmp_path / "no-keys"
    empty.mkdir()
    result = run_python(
        "import django; django.setup(); from merchant_platform import lifecycle; lifecycle.check_required_configuration()",
        IDENTITY_SIGNING_KEY_PATH=str(empty),
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("merchant-platform:")]
    assert len(lines) == 1 and "identity: no signing keypair" in lines[0] and "generate_signing_key" in lines[0]
    other = run_python(
        "import django; django.setup(); from merchant_platform import lifecycle; lifecycle.check_required_configuration()",
        IDENTITY_SIGNING_KEY_PATH=str(empty),
        APP_SERVICE="outreach",
    )
    assert other.returncode == 0, other.stderr  # only identity needs the keypair


def test_a_single_mounted_key_file_works(tmp_path, settings, client):
    path = keys.write_new_key(tmp_path)
    settings.IDENTITY_SIGNING_KEY_PATH = path
    assert [k["kid"] for k in client.get("/jw-certs").json()["keys"]] == [keys.KeyRing(path).keys[0].kid]
    assert json.loads(client.get("/jw-certs").content)["keys"][0]["alg"] == "ES256"
