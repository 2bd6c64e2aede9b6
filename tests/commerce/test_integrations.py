"""Provider integrations: CRUD per merchant, the credential sealed at rest and write-only (its mask
in every answer), never in a response, the admin, the OpenAPI document or a log line; the kernel
reader payment uses; and a credential sealed under another secret failing clearly (spec 7)."""

from __future__ import annotations

import pytest

from apps.commerce import services
from merchant_platform import crypto
from merchant_platform.integrations import merchant_integration
from merchant_platform.models import Configuration
from tests.commerce.conftest import new_merchant
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
URL = "/v1/api/commerce/integrations"
SECRET = "sk_live_51HxTopSecretCredential9f3a"


@pytest.fixture
def shop(seeded):
    merchant = new_merchant()
    return merchant, make_caller(roles=[("ADMIN", merchant.id)]).client()


def _create(client, merchant_id, **fields):
    body = {"merchantId": str(merchant_id), "code": "VNPAY", "credential": SECRET, "settings": {"terminal": "T1"}, **fields}
    return client.post(URL, body, format="json")


def test_credential_is_sealed_masked_and_opens_through_the_kernel_reader(shop):
    merchant, client = shop
    response = _create(client, merchant.id, environment="production")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["credential"] == "********9f3a" and body["merchantId"] == str(merchant.id)
    assert (body["group"], body["principalType"], body["environment"], body["status"]) == (
        "INTEGRATION",
        "MERCHANT",
        "production",
        "ACTIVE",
    )
    row = Configuration.objects.get(pk=body["id"])
    assert row.credential.startswith("v1.") and SECRET not in row.credential
    opened = merchant_integration(merchant_id=merchant.id, code="VNPAY", environment="production")
    assert opened.credential == SECRET and opened.settings == {"terminal": "T1"} and SECRET not in repr(opened)
    rotated = client.patch(f"{URL}/{body['id']}", {"credential": "short"}, format="json")
    assert rotated.status_code == 200 and rotated.json()["credential"] == "********"  # too short to show any of it
    assert merchant_integration(merchant_id=merchant.id, code="VNPAY", environment="production").credential == "short"


def test_one_integration_per_code_and_environment(shop):
    merchant, client = shop
    assert _create(client, merchant.id).status_code == 201
    clash = _create(client, merchant.id)
    assert clash.status_code == 409 and clash.json()["code"] == "INTEGRATION_EXISTS"
    assert _create(client, merchant.id, environment="production").status_code == 201


def test_another_merchants_integration_is_not_found(shop):
    _, client = shop
    elsewhere = services.integration_create(merchant_id=new_merchant().id, code="VNPAY", credential=SECRET)
    assert client.get(f"{URL}/{elsewhere.id}").status_code == 404
    assert client.patch(f"{URL}/{elsewhere.id}", {"status": "INACTIVE"}, format="json").status_code == 404
    assert client.get(URL).json()["results"] == []
    staff = make_caller(roles=[("EMPLOYEE", elsewhere.principal_id)]).client()
    assert staff.get(f"{URL}/{elsewhere.id}").status_code == 404  # staff do not read credentials' records


def test_inactive_or_deleted_integrations_are_not_read(shop):
    merchant, client = shop
    integration_id = _create(client, merchant.id).json()["id"]
    client.patch(f"{URL}/{integration_id}", {"status": "INACTIVE"}, format="json")
    with pytest.raises(Exception, match="no active integration") as caught:
        merchant_integration(merchant_id=merchant.id, code="VNPAY", environment="sandbox")
    assert caught.value.code == "INTEGRATION_NOT_FOUND"
    assert client.delete(f"{URL}/{integration_id}").status_code == 204
    assert client.get(f"{URL}/{integration_id}").status_code == 404


def test_another_secret_logs_decrypt_failed_and_fails_clearly(shop, settings, log_lines):
    merchant, client = shop
    _create(client, merchant.id)
    settings.APP_ENV_APPLICATION_SECRET = "another-secret-entirely-0123456789"
    with pytest.raises(crypto.DecryptionFailed) as caught:
        merchant_integration(merchant_id=merchant.id, code="VNPAY", environment="sandbox")
    assert caught.value.code == "DECRYPT_FAILED"
    assert any("decrypt failed" in line for line in log_lines.lines)
    assert client.get(URL).status_code == 200  # showing integrations never needs the key


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"credential": ""}, "credential"),
        ({"credential": 1234}, "credential"),
        ({"environment": "staging"}, "environment"),
        ({"code": "has space"}, "code"),
        ({"settings": ["x"]}, "settings"),
        ({"settings": {"k": "x" * 5000}}, "settings"),
        ({"credentialMask": "x"}, "credentialMask"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(shop, change, field):
    merchant, client = shop
    response = _create(client, merchant.id, **change)
    assert response.status_code == 400, response.content
    assert field in {error["field"] for error in response.json()["errors"]}


def test_the_credential_never_leaves(shop, client, admin_client, log_lines):
    merchant, api = shop
    outputs = []

    def record(response):
        assert response.status_code < 500, response.content
        outputs.append(response.content.decode())

    created = _create(api, merchant.id)
    record(created)
    integration_id = created.json()["id"]
    record(_create(api, merchant.id))  # the 409
    record(_create(api, merchant.id, environment="bogus"))  # a 400 echoing input
    record(api.get(URL))
    record(api.get(f"{URL}/{integration_id}"))
    record(api.patch(f"{URL}/{integration_id}", {"credential": SECRET + "-v2"}, format="json"))
    record(api.patch(f"{URL}/{integration_id}", {"credential": SECRET, "status": "bogus"}, format="json"))
    record(api.options(URL))
    for url in ["/v1/api/commerce/doc/openapi.json", "/v1/api/commerce/doc/ui"]:
        record(client.get(url))
    record(admin_client.get("/admin/merchant_platform/configuration/"))
    record(admin_client.get(f"/admin/merchant_platform/configuration/{integration_id}/change/"))
    record(admin_client.get("/admin/merchant_platform/configuration/", {"q": "VNPAY"}))
    assert any("VNPAY" in output for output in outputs)  # the capture does see the records
    sealed = Configuration.objects.get(pk=integration_id).credential
    lines = log_lines.lines
    assert any("/v1/api/commerce/integrations" in line for line in lines)  # and the request lines
    for secret in (SECRET, SECRET + "-v2", sealed):
        assert not [output[:200] for output in outputs if secret in output]
        assert not [line for line in lines if secret in line]


def test_a_provider_endpoint_on_a_private_address_is_refused(shop, settings):
    """settings.endpoint is a merchant's URL that payment calls: the outbound guard at create and update."""
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = False
    merchant, client = shop
    for endpoint in ("http://127.0.0.2:9", "http://[::ffff:10.0.0.1]/", "ftp://93.184.216.34/", 42):
        refused = _create(client, merchant.id, settings={"endpoint": endpoint})
        assert refused.status_code == 400 and [e["field"] for e in refused.json()["errors"]] == ["settings.endpoint"], refused.json()
    made = _create(client, merchant.id, settings={"endpoint": "https://93.184.216.34/pay"})
    assert made.status_code == 201, made.json()
    moved = client.patch(f"{URL}/{made.json()['id']}", {"settings": {"endpoint": "http://169.254.169.254/"}}, format="json")
    assert moved.status_code == 400 and [e["field"] for e in moved.json()["errors"]] == ["settings.endpoint"], moved.json()
