"""Item 10: one valid OpenAPI document per service holding only its paths and the problem shape;
the interactive views use locally served assets."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate

from merchant_platform.money import MAX_AMOUNT
from merchant_platform.registry import active_services, get_service

# Any absolute URL in an HTML attribute: the UI pages must not load anything from elsewhere.
EXTERNAL_ASSET = re.compile(r"""(?:src|href)=["'](?:https?:)?//""", re.IGNORECASE)
LOCAL_ASSET = re.compile(r"""(?:src|href)=["'](/static/[^"']+)["']""")


@pytest.mark.parametrize("service", [service.name for service in active_services() if service.openapi])
def test_service_document_is_valid_and_holds_only_its_paths(client, service):
    service = get_service(service)
    response = client.get(f"{service.prefix}/doc/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/") and "json" in response["Content-Type"]
    document = response.json()

    validate(document)
    assert document["info"]["title"].endswith(service.name)
    for path in document["paths"]:
        assert path.startswith(f"{service.prefix}/"), path
        assert "/doc/" not in path
    problem = document["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "code", "detail"} <= set(problem["required"])
    for path_item in document["paths"].values():
        for operation in path_item.values():
            if isinstance(operation, dict) and "responses" in operation:
                assert operation["responses"]["400"]["content"]["application/problem+json"]["schema"] == {
                    "$ref": "#/components/schemas/Problem"
                }


def _assert_local_page(client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200, path
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert not EXTERNAL_ASSET.search(html), f"{path} loads an external asset"
    assets = LOCAL_ASSET.findall(html)
    assert assets, path
    for asset in assets:
        served = client.get(asset)
        assert served.status_code == 200, asset
        b"".join(served.streaming_content) if served.streaming else served.content


@pytest.mark.parametrize("path", ["/v1/api/outreach/doc", "/v1/api/signal/doc", "/v1/api/signal/explorer"])
def test_interactive_views_answer_with_local_assets(client, path):
    _assert_local_page(client, path)


def test_every_service_has_local_ui_and_redoc_views(client):
    for service in active_services():
        if service.openapi:
            _assert_local_page(client, f"{service.prefix}/doc/ui")
            _assert_local_page(client, f"{service.prefix}/doc/redoc")


def test_signal_publishes_its_document_at_openapi_json_too(client):
    response = client.get("/v1/api/signal/openapi.json")
    assert response.status_code == 200
    validate(response.json())
    assert response.json() == client.get("/v1/api/signal/doc/openapi.json").json()


SPLIT_DOCUMENT = """
import django
django.setup()
from django.test import Client
from merchant_platform.registry import get_service
service = get_service("{name}")
response = Client(raise_request_exception=False, SERVER_NAME="localhost").get(service.prefix + "/doc/openapi.json")
print(response.status_code, response.json()["info"]["title"])
"""


@pytest.mark.slow
def test_each_service_alone_serves_its_document(test_database_env):
    """Split topology (APP_SERVICE=<name>): a service's document names only models it installs, so
    overrides another service declares (OUTREACH_OPENAPI_SETTINGS) never reach it."""
    from tests.kernel.conftest import python_command, run_all

    names = [service.name for service in active_services() if service.openapi]
    results = run_all(*((python_command(SPLIT_DOCUMENT.format(name=name)), {**test_database_env, "APP_SERVICE": name}) for name in names))
    for name, result in zip(names, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert f"200 Merchant Platform: {name}" in result.stdout.splitlines(), result.stdout[-2000:]


def _document(client, name: str) -> dict:
    return client.get(f"{get_service(name).prefix}/doc/openapi.json").json()


def test_fields_that_answer_null_are_marked_nullable(client):
    user = _document(client, "identity")["components"]["schemas"]["User"]["properties"]
    assert user["lastSignInAt"]["nullable"] is True
    subscriber = _document(client, "outreach")["components"]["schemas"]["Subscriber"]["properties"]
    assert subscriber["confirmedAt"]["nullable"] is True and subscriber["unsubscribedAt"]["nullable"] is True


def test_declared_errors_and_enforced_constraints_are_in_the_documents(client, settings):
    outreach = _document(client, "outreach")
    subscriber_patch = outreach["paths"]["/v1/api/outreach/subscribers/{id}"]["patch"]["responses"]
    assert subscriber_patch["409"]["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}
    listing = outreach["paths"]["/v1/api/outreach/inquiries"]["get"]["parameters"]
    page_size = next(parameter for parameter in listing if parameter["name"] == "pageSize")
    assert (page_size["schema"]["minimum"], page_size["schema"]["maximum"]) == (1, 200)
    sign_up = _document(client, "identity")["components"]["schemas"]["SignUpRequest"]["properties"]
    assert sign_up["password"]["minLength"] == settings.IDENTITY_PASSWORD_MIN_LENGTH
    for name in ("identity", "licensing", "outreach"):
        for path_item in _document(client, name)["paths"].values():
            for operation in path_item.values():
                for status_code, response in operation.get("responses", {}).items() if isinstance(operation, dict) else ():
                    if status_code[:1] in "45":
                        assert "application/problem+json" in response.get("content", {}), (name, status_code)


def test_no_operation_or_schema_is_described_by_a_kernel_base_class(client):
    """drf-spectacular describes a view or serializer without a docstring by its nearest base's
    docstring; the kernel's bases must not put their implementation notes into every service's document."""
    import inspect

    from merchant_platform import authentication_classes, serializers, views
    from merchant_platform.policy import permissions as policy_permissions

    kernel_docs = {
        inspect.getdoc(cls)
        for module in (views, policy_permissions, authentication_classes, serializers)
        for cls in vars(module).values()
        if inspect.isclass(cls) and cls.__module__ == module.__name__ and inspect.getdoc(cls)
    }
    for service in active_services():
        if not service.openapi:
            continue
        for path_item in _document(client, service.name)["paths"].values():
            for operation in path_item.values():
                if isinstance(operation, dict):
                    assert operation.get("description", "") not in kernel_docs, operation.get("operationId")
        for name, schema in _document(client, service.name)["components"]["schemas"].items():
            assert schema.get("description", "") not in kernel_docs, name


def test_request_bodies_state_what_the_serializers_refuse(client):
    """Issue 34 item 7: a client generated from a document sends only what the serializers accept."""
    for service in active_services():
        if not service.openapi:
            continue
        for name, schema in _document(client, service.name)["components"]["schemas"].items():
            if name.endswith("Request"):  # every request body is a kernel serializer: unknown members refused
                assert schema["additionalProperties"] is False, (service.name, name)
    commerce = _document(client, "commerce")["components"]["schemas"]
    variant = commerce["VariantCreateRequest"]["properties"]
    assert (variant["priceAmount"]["minimum"], variant["priceAmount"]["maximum"]) == (0, MAX_AMOUNT)
    assert variant["unitCostAmount"]["maximum"] == MAX_AMOUNT
    assert variant["currency"]["allOf"] == [{"$ref": "#/components/schemas/CurrencyEnum"}]
    assert "EUR" in commerce["CurrencyEnum"]["enum"] and "FR" in commerce["CountryEnum"]["enum"]
    snowflake = re.compile(variant["primaryProductId"]["pattern"])
    assert snowflake.match("7234051226640384001") and not snowflake.match("0") and not snowflake.match("9" * 19)
    merchant = commerce["MerchantCreateRequest"]["properties"]
    assert not re.match(merchant["name"]["pattern"], "a\nb") and re.match(merchant["name"]["pattern"], "Shop")
    assert merchant["slug"]["pattern"] == "^[a-z0-9]+(?:[-_][a-z0-9]+)*$"  # a field's own pattern is kept
    assert commerce["SaleOrderCreateRequest"]["properties"]["lines"]["minItems"] == 1
    finance = _document(client, "finance")["components"]["schemas"]
    assert finance["LineInputRequest"]["properties"]["debit"]["maximum"] == MAX_AMOUNT
    rate = _document(client, "taxation")["components"]["schemas"]["TaxItemRequest"]["properties"]["rate"]["pattern"]
    assert re.match(rate, "8.5") and not any(re.match(rate, text) for text in ("", ".", "-", "-1"))
    quantity = _document(client, "taxation")["components"]["schemas"]["QuoteLineInputRequest"]["properties"]["quantity"]["pattern"]
    assert re.match(quantity, "0.0001") and not any(re.match(quantity, text) for text in ("0", "0.0000", "-1"))
    delta = _document(client, "inventory")["components"]["schemas"]["AdjustmentRequest"]["properties"]["delta"]
    assert delta["not"] == {"enum": [0]}
