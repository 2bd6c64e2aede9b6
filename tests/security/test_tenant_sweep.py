"""The hostile-tenant sweep over HTTP: generated from every service's OpenAPI document, not hand-listed.

Two merchants A and B each hold one record of every kind (tests/security/tenants.py). For every
operation of every document that takes an id (a path or query parameter, or a body member, whose
name marks it as an id: `id`, `merchant_id`, `*Id`, `*Ids`, `domain`, `room`, also inside an array of
objects such as `lines[].variantId`), the sweep sends A's real id of the kind the parameter names,
as B's OWNER, B's CASHIER and an ADMIN of B, the rest of the request being valid for B (after a
control naming B's own record, rolled back, whose answer the coverage report shows). The rule:

- an answer >= 300 passes (refused);
- a 2xx passes only when its body names none of A's record ids or A's merchant id (a list filtered
  to nothing of A's is fine), unless the table marks the operation as public by design;
- in every case nothing of A's changes: every row of every service table (bookkeeping tables and
  volatile timestamps left out) that existed before is there after, unchanged, and no new row names
  merchant A.

The only hand-written part is ID_KINDS, which says which kind of record each parameter names;
`test_every_id_parameter_is_mapped` fails for a parameter it does not map, so a new route with an id
cannot slip past the sweep. `test_coverage_report` prints operation -> ids sent -> outcome.

Holes that are today's behaviour (other branches fix them) are listed in KNOWN_HOLES, whose cases
get `pytest.param(..., marks=xfail(strict=True))`: when a fix lands, its case XPASSes and fails, and
the entry goes.

Also here: every read without an id shows B nothing of A's; the public IPN and payment's webhook into
commerce across merchants; a merchant-supplied provider endpoint aimed at the platform's network.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime
import http.server
import json
import re
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections, transaction
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook

from merchant_platform.registry import active_services
from tests.commerce.test_media import png
from tests.fuzz.documents import wsgi_schemas
from tests.payment.conftest import IPN_PATHS, signed
from tests.security.tenants import Tenant, changes, seed_tenant, service_tables, snapshot
from tests.support.auth import service_headers
from tests.support.database import seeded_module_transaction

DOCUMENTS = {name: schema.raw_schema for name, schema in wsgi_schemas().items()}
PREFIXES = {service.name: service.prefix for service in active_services()}
METHODS = ("get", "post", "put", "patch", "delete")
ID_NAME = re.compile(r"^(id|merchant_id|domain|room)$|Ids?$")


@dataclass(frozen=True)
class Public:
    """An operation open to anyone by design when it names A's record (the reason says why)."""

    kind: str
    reason: str


@dataclass(frozen=True)
class NotARecord:
    """A member whose name looks like an id but that names no stored record (the reason says what it is)."""

    reason: str


# Which kind of record each id names: "<service>:<resource>" for a path `id` (the resource is the
# path's first segment after the service prefix), "<service>:<resource>:<name>" or "<service>:<name>"
# for the other parameters and body members (the first that exists wins). A kind is a key of
# Tenant.ids. Public(...) marks an operation open to every caller by design; NotARecord(...) a
# caller-chosen label that only looks like an id (listed in the coverage, not sent).
ID_KINDS: dict[str, str | Public | NotARecord] = {
    # identity
    "identity:internal": "user",
    "identity:users": "user",
    "identity:policies": "policy",
    "identity:subjectId": "user",
    "identity:policies:subjectId": Public("user", "a merchant's ADMIN grants roles in its own merchant to any user: how an employee joins"),
    "identity:domain": "merchant",
    # commerce
    "commerce:integrations": "integration",
    "commerce:media": "media",
    "commerce:merchants": "merchant",
    "commerce:products": "product",
    "commerce:sale-orders": "sale_order",
    "commerce:variants": "variant",
    "commerce:payment-webhooks:merchant_id": "merchant",
    "commerce:merchantId": "merchant",
    "commerce:productId": "product",
    "commerce:taxGroupId": "tax_group",
    "commerce:paymentTransactionId": "payment_transaction",
    "commerce:financeAccountId": "finance_account",
    "commerce:primaryProductId": "product",
    "commerce:lines[].variantId": "variant",
    "commerce:refund:lines[].lineId": NotARecord("a line of the order in the path, by its number"),
    "commerce:refund:lines[].locationId": "location",
    # finance
    "finance:accounts": "finance_account",
    "finance:transactions": "finance_transaction",
    "finance:vouchers": "voucher",
    "finance:merchantId": "merchant",
    "finance:accountId": "finance_account",
    "finance:voucherId": "voucher",
    "finance:sourceId": "sale_order",
    "finance:lines[].accountId": "finance_account",
    # inventory
    "inventory:items": "item",
    "inventory:locations": "location",
    "inventory:purchase-orders": "purchase_order",
    "inventory:stock": "stock",
    "inventory:tickets": "ticket",
    "inventory:tracking": "tracking",
    "inventory:merchantId": "merchant",
    "inventory:orderId": "reservation_order",
    "inventory:reservations:orderId": Public(
        "reservation_order", "the sale side's order reference, a key within the merchant the request names (a new reservation)"
    ),
    "inventory:lineIds": NotARecord("the caller's own line labels within the order it names"),
    "inventory:productId": "product",
    "inventory:variantId": "variant",
    "inventory:inventoryItemId": "item",
    "inventory:locationId": "location",
    "inventory:stockId": "stock",
    "inventory:referenceId": "sale_order",
    "inventory:receiptId": NotARecord("the caller's idempotency label of one receipt of the order in the path"),
    "inventory:lines[].inventoryItemId": "item",
    "inventory:lines[].variantId": "variant",
    "inventory:lines[].locationId": "location",
    "inventory:lines[].lineId": NotARecord("the caller's label of a line of its order"),
    # ledger
    "ledger:ledgers": "ledger",
    "ledger:merchantId": "merchant",
    "ledger:accountId": "finance_account",
    # taxation
    "taxation:rounding-policies": "rounding_policy",
    "taxation:tax-groups": "tax_group",
    "taxation:tax-sets": "tax_set",
    "taxation:merchantId": "merchant",
    "taxation:productId": "product",
    "taxation:taxGroupId": "tax_group",
    "taxation:lines[].productId": "product",
    # signal
    "signal:notifications": "notification",
    "signal:room": "room",
    # payment
    "payment:attempts": "payment_attempt",
    "payment:refunds": "payment_refund",
    "payment:transactions": "payment_transaction",
    "payment:webhook-deliveries": "webhook_delivery",
    "payment:webhooks": "webhook",
    "payment:merchantId": "merchant",
    "payment:transactionId": "payment_transaction",
    "payment:webhookId": "webhook",
    "payment:sourceId": NotARecord(
        "a user's transaction is MANUAL: its sourceId is the merchant's own free reference, which consumers never match"
        " to a sale order (only an ORDER, opened with commerce's service account, is)"
    ),
    "payment:financeAccountId": "finance_account",
    "payment:lines[].variantId": "variant",
    "payment:lines[].lineId": NotARecord("the sale side's label of a line of its order"),
    "payment:lines[].locationId": "location",
    # licensing (policies are the platform-wide catalogue: no tenant, readable by every user)
    "licensing:activations": "activation",
    "licensing:licenses": "license",
    "licensing:policies": Public("licensing_policy", "the platform-wide catalogue of license policies, not a tenant's record"),
    "licensing:licenseId": "license",
    "licensing:merchantId": "merchant",
    "licensing:ownerId": "user",
    "licensing:licenses:ownerId": Public("user", "a license is issued to any platform user (its holder), in the issuer's merchant"),
    "licensing:policyId": Public("licensing_policy", "the platform-wide catalogue"),
    # outreach
    "outreach:inquiries": "inquiry",
    "outreach:subscribers": "subscriber",
    "outreach:merchantId": "merchant",
    "outreach:inquiries:merchantId": "merchant",
    "outreach:submit:merchantId": Public("merchant", "the public contact form: anyone may send an inquiry to a merchant"),
}


@dataclass(frozen=True)
class Case:
    service: str
    method: str
    path: str  # the document's template
    member: str  # "path:id", "query:merchantId", "body:lines[].variantId"

    @property
    def resource(self) -> str:
        return self.path.removeprefix(PREFIXES[self.service]).strip("/").split("/")[0]

    @property
    def name(self) -> str:
        return self.member.split(":", 1)[1]

    @property
    def label(self) -> str:
        return f"{self.method.upper()} {self.path} {self.member}"

    def kind(self) -> str | Public | NotARecord | None:
        if self.member == "path:id":
            return ID_KINDS.get(f"{self.service}:{self.resource}")
        last = self.path.rstrip("/").split("/")[-1]
        for key in (f"{self.service}:{last}:{self.name}", f"{self.service}:{self.resource}:{self.name}", f"{self.service}:{self.name}"):
            if key in ID_KINDS:
                return ID_KINDS[key]
        return None


def _resolve(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].split("/")[-1]]
    return schema


def _body_members(document: dict, operation: dict) -> list[str]:
    content = operation.get("requestBody", {}).get("content", {})
    members = []
    for media in content.values():
        schema = _resolve(document, media.get("schema", {}))
        for name, raw in schema.get("properties", {}).items():
            member = _resolve(document, raw)
            if member.get("readOnly"):
                continue
            if ID_NAME.search(name):
                members.append(name)
            items = _resolve(document, member.get("items", {})) if member.get("type") == "array" else {}
            members += [f"{name}[].{inner}" for inner in items.get("properties", {}) if ID_NAME.search(inner)]
        break
    return members


def generated_cases() -> list[Case]:
    """One case per id parameter or id body member of every operation of every document."""
    cases = []
    for service, document in DOCUMENTS.items():
        for path, item in document["paths"].items():
            for method, operation in item.items():
                if method not in METHODS:
                    continue
                parameters = [*item.get("parameters", []), *operation.get("parameters", [])]
                for parameter in parameters:
                    if parameter.get("in") in ("path", "query") and ID_NAME.search(parameter["name"]):
                        cases.append(Case(service, method, path, f"{parameter['in']}:{parameter['name']}"))
                cases += [Case(service, method, path, f"body:{member}") for member in _body_members(document, operation)]
    return cases


CASES = generated_cases()


def valid_body(case: Case, ids: Mapping[str, str]) -> dict:
    """A body valid for the merchant whose record ids are `ids` (B's), so the id check is what a
    request with A's id reaches."""
    suffix = case.path.removeprefix(PREFIXES[case.service])
    bodies = {
        ("post", "/policies"): {"kind": "ROLE", "subjectId": ids["user"], "role": "EMPLOYEE", "domain": ids["merchant"]},
        ("post", "/products"): {"name": "Lamp", "merchantId": ids["merchant"], "taxGroupId": ids["tax_group"]},
        ("patch", "/products/{id}"): {"taxGroupId": ids["tax_group"]},
        ("post", "/variants"): {"sku": "SWEEP-NEW", "priceAmount": 100, "currency": "EUR", "primaryProductId": ids["product"]},
        ("post", "/integrations"): {"merchantId": ids["merchant"], "code": "QR2", "credential": "secret-credential"},
        ("post", "/sale-orders"): {
            "merchantId": ids["merchant"],
            "lines": [{"variantId": ids["variant"], "quantity": 1}],
            "financeAccountId": ids["finance_account"],
        },
        ("patch", "/sale-orders/{id}"): {
            "lines": [{"variantId": ids["variant"], "quantity": 1}],
            "financeAccountId": ids["finance_account"],
        },
        ("post", "/sale-orders/{id}/actions/refund"): {
            "lines": [{"lineId": "1", "quantity": 1, "restock": True, "locationId": ids["location"]}],
            "reason": "sweep",
        },
        ("patch", "/accounts/{id}"): {"name": "Renamed"},
        ("patch", "/items/{id}"): {"allowOversell": True},
        ("post", "/tickets/{id}/count"): {"countedQuantity": 3},
        ("post", "/transactions/{id}/attempts"): {"channel": "QR"},
        ("post", "/licenses/{id}/actions/validate"): {"fingerprint": "sweep-fp"},
        ("patch", "/inquiries/{id}"): {"status": "CANCELLED"},
        ("post", "/accounts"): {"merchantId": ids["merchant"], "name": "Petty", "code": "1999", "type": "ASSET", "currency": "EUR"},
        ("post", "/vouchers"): {
            "merchantId": ids["merchant"],
            "kind": "ADJUSTMENT",
            "reason": "correction",
            "lines": [{"accountId": ids["finance_account"], "debit": 5}, {"accountId": ids["finance_account"], "credit": 5}],
        },
        ("post", "/internal/reservations"): {
            "orderId": "sweep-new-order",
            "merchantId": ids["merchant"],
            "lines": [  # a line names its item or its variant, not both
                {"lineId": "2", "variantId": ids["variant"], "quantity": 1}
                if case.member == "body:lines[].variantId"
                else {"lineId": "1", "inventoryItemId": ids["item"], "quantity": 1, "locationId": ids["location"]}
            ],
        },
        ("post", "/internal/reservations/commit"): {"orderId": ids["reservation_order"]},
        ("post", "/internal/reservations/release"): {"orderId": ids["reservation_order"], "lineIds": ["1"]},
        ("post", "/locations"): {"merchantId": ids["merchant"], "name": "Shelf"},
        ("post", "/purchase-orders"): {
            "merchantId": ids["merchant"],
            "supplier": "Acme",
            "currency": "EUR",
            "locationId": ids["location"],
            "lines": [{"inventoryItemId": ids["item"], "quantity": 1, "unitCostAmount": 100}],
        },
        ("post", "/purchase-orders/{id}/receive"): {"receiptId": "r-1", "lines": [{"inventoryItemId": ids["item"], "quantity": 1}]},
        ("post", "/stock/adjustments"): {"inventoryItemId": ids["item"], "locationId": ids["location"], "delta": 1, "reason": "found"},
        ("post", "/tickets"): {"inventoryItemId": ids["item"], "locationId": ids["location"]},
        ("post", "/ledgers"): {
            "merchantId": ids["merchant"],
            "type": "ACCOUNT_STATEMENT",
            "format": "CSV",
            "period": "2026-01",
            "accountId": ids["finance_account"],
        },
        ("post", "/quotes"): {
            "merchantId": ids["merchant"],
            "currency": "EUR",
            "lines": [{"productId": ids["product"], "quantity": "1", "unitPrice": 100}],
        },
        ("post", "/rounding-policies"): {"merchantId": ids["merchant"], "mode": "LINE"},
        ("post", "/tax-groups"): {"merchantId": ids["merchant"], "name": "Reduced", "items": [{"name": "VAT", "rate": "0.05"}]},
        ("post", "/tax-provisioning/provision"): {"productId": ids["product"], "taxGroupId": ids["tax_group"]},
        ("post", "/tax-provisioning/deprovision"): {"productId": ids["product"]},
        ("post", "/transactions"): {
            "merchantId": ids["merchant"],
            "sourceId": "sweep-order",
            "amount": 100,
            "currency": "EUR",
            "financeAccountId": ids["finance_account"],
        },
        ("post", "/webhooks"): {
            "merchantId": ids["merchant"],
            "name": "hook",
            "url": "https://93.184.215.14/b",
            "eventTypes": ["transaction.settled"],
        },
        ("post", "/activations"): {"licenseId": ids["license"], "fingerprint": "sweep-fp"},
        ("post", "/licenses"): {"ownerId": ids["user"], "merchantId": ids["merchant"]},
        ("patch", "/licenses/{id}"): {"ownerId": ids["user"], "merchantId": ids["merchant"]},
        ("post", "/inquiries/submit"): {
            "name": "Bob",
            "email": "bob@example.com",
            "subject": "Hi",
            "message": "Hello",
            "merchantId": ids["merchant"],
        },
    }
    return copy.deepcopy(bodies.get((case.method, suffix), {}))


# Query parameters an operation needs besides its ids.
QUERIES = {
    ("get", "/products/search"): {"q": "Lamp"},
    ("get", "/accounts/{id}/statement"): {"dateFrom": "2026-01-01", "dateTo": "2026-12-31"},
}


def a_value(kind: str, a: Tenant) -> str:
    if kind == "room":
        return f"merchant.{a.merchant_id}.commerce"
    return a.ids[kind]


def build_request(case: Case, kind: str, a: Tenant, b: Tenant) -> tuple[str, dict, dict | None]:
    """(url, query, body): A's id where the case's member is, B's valid request elsewhere."""
    body = valid_body(case, b.ids) if case.method in ("post", "put", "patch") else None
    query = dict(QUERIES.get((case.method, case.path.removeprefix(PREFIXES[case.service])), {}))
    value = a_value(kind, a)
    path = case.path
    if case.member.startswith("path:"):
        path = path.replace("{" + case.name + "}", value)
    for placeholder in re.findall(r"{(\w+)}", path):  # the other path ids: A's record the path names
        path = path.replace(
            "{" + placeholder + "}", a_value(_kind_of(Case(case.service, case.method, case.path, f"path:{placeholder}")), a)
        )
    if case.member.startswith("query:"):
        query[case.name] = value
    if case.member.startswith("body:"):
        body = body if body is not None else {}
        outer, _, inner = case.name.partition("[].")
        if inner:
            lines = body.get(outer) or [{}]
            for line in lines:
                line[inner] = value
            body[outer] = lines
        else:
            body[outer] = [value] if outer.endswith("Ids") else value
    return path, query, body


def _kind_of(case: Case) -> str:
    kind = case.kind()
    return kind.kind if isinstance(kind, Public) else kind


def a_ids(a: Tenant) -> set[str]:
    """A's ids that are unambiguous in an answer (snowflakes, not small sequence numbers)."""
    return {value for value in [*a.ids.values(), str(a.merchant_id)] if len(value) > 8}


def named_in(answer, ids: set[str]) -> list[str]:
    """A's ids that appear as values in a JSON answer (pagination links, which echo the query, left out)."""
    found = []
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key not in ("next", "previous"):
                found += named_in(value, ids)
    elif isinstance(answer, list):
        for value in answer:
            found += named_in(value, ids)
    elif answer is not None and str(answer) in ids:
        found.append(str(answer))
    return found


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """The seeds and both tenants, made once for the module inside a transaction on every database
    that is rolled back at its end (each test's own transaction nests in it)."""
    with seeded_module_transaction(django_db_blocker):
        a, b = seed_tenant("a"), seed_tenant("b")
        yield {"a": a, "b": b, "tables": service_tables()}


OUTCOMES: dict[str, list[str]] = {}


def _call(case: Case, client, path: str, query: dict, body: dict | None):
    call = getattr(client, case.method)
    if case.method == "get" or (case.method == "delete" and body is None):
        return call(path, query, HTTP_HOST="localhost")
    if case.path.endswith("/media") and case.method == "post":
        upload = SimpleUploadedFile("lamp.png", png(), content_type="image/png")
        return call(path, {**(body or {}), "file": upload}, format="multipart", HTTP_HOST="localhost")
    url = path + ("?" + urlencode(query) if query else "")
    return call(url, json.dumps(body or {}), content_type="application/json", HTTP_HOST="localhost")


def _outcome(response) -> str:
    code = ""
    if response.status_code >= 400:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            code = response.json().get("code", "")
    return f"{response.status_code} {code}".rstrip()


def send(case: Case, role: str, world) -> tuple[int, list[str], list[str]]:
    """Send the case as B's `role`; (status, A's ids named in a 2xx answer, A's rows changed).

    First the control (the same request naming B's own record, rolled back), recorded in the
    coverage so that a refusal of A's id can be told from a request B could not make anyway."""
    a, b, tables = world["a"], world["b"], world["tables"]
    kind = case.kind()
    client = service_client() if role == "service" else getattr(b, role).client()
    with contextlib.ExitStack() as stack:
        for alias in connections:
            stack.enter_context(transaction.atomic(using=alias))
        control = _outcome(_call(case, client, *build_request(case, _kind_of(case), b, b)))
        for alias in connections:
            transaction.set_rollback(True, using=alias)
    before = snapshot(tables)
    response = _call(case, client, *build_request(case, _kind_of(case), a, b))
    changed = changes(before, snapshot(tables), a.merchant_id, public=isinstance(kind, Public))
    named: list[str] = []
    if 200 <= response.status_code < 300 and not isinstance(kind, Public):
        with contextlib.suppress(ValueError):
            named = named_in(response.json(), a_ids(a))
    OUTCOMES.setdefault(case.label, []).append(f"{role}: own id -> {control}, A's {_kind_of(case)} -> {_outcome(response)}")
    return response.status_code, named, changed


# B's users the sweep calls as: its OWNER (the seller), its CASHIER (the narrowest baseline) and an
# ADMIN of merchant B (every permission in B: the id check is then the only thing left to refuse).
ROLES = ("owner", "cashier", "admin")


# Holes the sweep finds that a change in flight is fixing, (case label, role) -> what happens
# (expected: a 4xx naming the member, nothing written): their cases are strict xfails, so a fix that
# lands turns them into failures until the entry goes. None today.
KNOWN_HOLES: dict[tuple[str, str], str] = {}


def service_client() -> APIClient:
    client = APIClient()
    client.credentials(**service_headers())
    return client


def acts_for_a_merchant(case: Case) -> bool:
    """A service-to-service operation whose request names the merchant it acts for (B here): it must
    refuse records of another merchant even from a trusted caller, whose values come from users."""
    if case.path.removeprefix(PREFIXES[case.service]).startswith("/internal/") or case.service == "taxation":
        return case.method != "get" and case.member != "body:merchantId" and "merchantId" in valid_body(case, defaultdict(str))
    return False


def sweep_params() -> list:
    params = []
    for case in CASES:
        if case.kind() is None or isinstance(case.kind(), NotARecord):
            continue  # unmapped: test_every_id_parameter_is_mapped fails for it
        for role in (*ROLES, "service") if acts_for_a_merchant(case) else ROLES:
            reason = KNOWN_HOLES.get((case.label, role))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(case, role, marks=marks, id=f"{case.label} as {role}"))
    return params


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize(("case", "role"), sweep_params())
def test_b_cannot_reach_or_change_a_through_an_id(case: Case, role: str, world):
    status, named, changed = send(case, role, world)
    assert not changed, f"{case.label} as B's {role} ({status}) changed A's records: {changed}"
    assert not named, f"{case.label} as B's {role} answered {status} with A's ids {named}"


def reads_without_an_id() -> list[tuple[str, str]]:
    """(service, path) of every GET whose path takes no parameter: lists, counts, reports, search."""
    return [
        (service, path)
        for service, document in DOCUMENTS.items()
        for path, item in document["paths"].items()
        if "get" in item and "{" not in path and not path.endswith(("/openapi.json", "/doc", "/doc/"))
    ]


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("service", "path"), reads_without_an_id(), ids=[path for _, path in reads_without_an_id()])
def test_a_read_without_an_id_shows_b_nothing_of_a(service: str, path: str, role: str, world):
    """Lists, counts and searches without any filter, as B's users: no answer names A's ids (the
    query that some need, as for the id sweep)."""
    a, b = world["a"], world["b"]
    query = dict(QUERIES.get(("get", path.removeprefix(PREFIXES[service])), {}))
    response = getattr(b, role).client().get(path, query, HTTP_HOST="localhost")
    named: list[str] = []
    if 200 <= response.status_code < 300 and response.get("content-type", "").startswith("application/json"):
        named = named_in(response.json(), a_ids(a))
    assert not named, f"GET {path} as B's {role} answered {response.status_code} with A's ids {named}"


def test_every_id_parameter_is_mapped():
    """A parameter or body member that names a record and that ID_KINDS does not map fails here."""
    unmapped = [case.label for case in CASES if case.kind() is None]
    assert not unmapped, "map these in ID_KINDS: " + "; ".join(unmapped)
    unused = set(ID_KINDS) - {key for case in CASES for key in _keys(case)}
    assert not unused, f"ID_KINDS entries no operation has: {sorted(unused)}"


def _keys(case: Case) -> list[str]:
    if case.member == "path:id":
        return [f"{case.service}:{case.resource}"]
    last = case.path.rstrip("/").split("/")[-1]
    return [f"{case.service}:{last}:{case.name}", f"{case.service}:{case.resource}:{case.name}", f"{case.service}:{case.name}"]


def test_coverage_report(capsys):
    """Prints operation -> ids sent -> outcome (the outcomes of the sweep run before it in this
    process), and the operations with ids per service; fails when there is none to cover."""
    by_service: dict[str, int] = {}
    for case in CASES:
        by_service[case.service] = by_service.get(case.service, 0) + 1
    with capsys.disabled():
        print(f"\nhostile-tenant sweep: {len(CASES)} id parameters over {len({(c.method, c.path) for c in CASES})} operations")
        for service, count in sorted(by_service.items()):
            print(f"  {service}: {count}")
        for case in CASES:
            kind = case.kind()
            if isinstance(kind, NotARecord):
                print(f"  {case.label} -> not a record id: {kind.reason}")
            else:
                print(f"  {case.label} -> {'; '.join(OUTCOMES.get(case.label, ['not run in this process']))}")
    assert set(by_service) == {name for name in DOCUMENTS if any(c.service == name for c in CASES)}
    assert len(CASES) > 100


def _subscribe(merchant_id: int) -> str:
    """Commerce's subscription at payment for the merchant, as its first placing makes it; the secret."""
    from apps.commerce.models import PaymentSubscription
    from apps.commerce.sales import services as sales
    from merchant_platform import crypto

    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    sealed = crypto.encrypt(secret, purpose=sales.SECRET_PURPOSE, associated_data=str(merchant_id).encode())
    PaymentSubscription.objects.create(merchant_id=merchant_id, webhook_id=int(time.time()), sealed_secret=sealed)
    return secret


@pytest.mark.django_db(databases="__all__")
def test_a_payment_webhook_signed_for_b_cannot_move_an_order_of_a(world, client):
    """Webhooks in: payment's signed webhook names the order by its placement reference. Signed for
    B, it is refused at A's URL (A's secret) and, at B's URL, finds no order of A's (ignored)."""
    from apps.commerce.models import SaleOrder

    a, b, tables = world["a"], world["b"], world["tables"]
    SaleOrder.objects.filter(pk=a.ids["sale_order"]).update(status="PLACED", placement_reference=a.ids["sale_order"], placement_attempt=1)
    _subscribe(a.merchant_id)
    b_secret = _subscribe(b.merchant_id)
    body = json.dumps(
        {"event": "transaction.settled", "transaction": {"id": a.ids["payment_transaction"], "sourceId": a.ids["sale_order"]}}
    )
    now = datetime.datetime.now(tz=datetime.UTC)
    headers = {
        "HTTP_WEBHOOK_ID": "msg_sweep",
        "HTTP_WEBHOOK_TIMESTAMP": str(int(now.timestamp())),
        "HTTP_WEBHOOK_SIGNATURE": Webhook(b_secret).sign("msg_sweep", now, body),
        "HTTP_HOST": "localhost",
    }
    before = snapshot(tables)
    at_a = client.post(f"{PREFIXES['commerce']}/payment-webhooks/{a.merchant_id}", body, content_type="application/json", **headers)
    at_b = client.post(f"{PREFIXES['commerce']}/payment-webhooks/{b.merchant_id}", body, content_type="application/json", **headers)
    assert (at_a.status_code, at_a.json()["code"]) == (401, "WEBHOOK_SIGNATURE_INVALID")
    assert (at_b.status_code, at_b.json()) == (200, {"outcome": "unmatched"})  # recorded for reconciliation, not applied
    assert not changes(before, snapshot(tables), a.merchant_id)
    assert SaleOrder.objects.get(pk=a.ids["sale_order"]).status == "PLACED"
    # The control: the same webhook naming B's own placed order pays it.
    SaleOrder.objects.filter(pk=b.ids["sale_order"]).update(
        status="PLACED", placement_reference=b.ids["sale_order"], placement_attempt=1, payment_transaction_id=b.ids["payment_transaction"]
    )
    order = SaleOrder.objects.get(pk=b.ids["sale_order"])
    settled = {
        "id": b.ids["payment_transaction"],
        "sourceId": b.ids["sale_order"],
        "merchantId": str(b.merchant_id),
        "status": "SETTLED",
        "amount": order.gross_amount,
        "currency": order.currency,
    }
    own = json.dumps({"event": "transaction.settled", "transaction": settled})
    headers.update(HTTP_WEBHOOK_ID="msg_sweep_own", HTTP_WEBHOOK_SIGNATURE=Webhook(b_secret).sign("msg_sweep_own", now, own))
    paid = client.post(f"{PREFIXES['commerce']}/payment-webhooks/{b.merchant_id}", own, content_type="application/json", **headers)
    assert (paid.status_code, paid.json()) == (200, {"outcome": "paid"})


@pytest.mark.django_db(databases="__all__")
def test_an_ipn_for_an_attempt_of_a_signed_with_bs_provider_secret_is_refused(world, client):
    """The public IPN: an attempt of A's is confirmed only under A's own provider secret; B's
    secret answers 97 (bad signature) and changes nothing. The control: A's secret confirms it."""
    from apps.payment.models import PaymentAttempt

    a, b, tables = world["a"], world["b"], world["tables"]
    attempt = PaymentAttempt.objects.get(pk=a.ids["payment_attempt"])
    fields = {
        "prov_TxnRef": attempt.code,
        "prov_TransactionNo": "14009999",
        "prov_Amount": str(attempt.amount * 100),
        "prov_ResponseCode": "00",
        "prov_BankCode": "NCB",
        "prov_PayDate": "20261125133000",
    }
    before = snapshot(tables)
    forged = client.post(
        IPN_PATHS["QR"], json.dumps(signed(fields, b.provider_secret)), content_type="application/json", HTTP_HOST="localhost"
    )
    assert (forged.status_code, forged.json()["RspCode"]) == (200, "97")
    assert not changes(before, snapshot(tables), a.merchant_id)
    genuine = client.post(
        IPN_PATHS["QR"], json.dumps(signed(fields, a.provider_secret)), content_type="application/json", HTTP_HOST="localhost"
    )
    assert genuine.json()["RspCode"] == "00"
    assert PaymentAttempt.objects.get(pk=attempt.pk).status == "302_SUCCESS"


class _Listener(http.server.BaseHTTPRequestHandler):
    """A service on the platform's own network (here loopback), recording who reached it."""

    reached: list[str] = []

    def do_POST(self):
        self.reached.append(self.path)
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        return


@pytest.mark.django_db(databases="__all__")
def test_a_merchants_provider_endpoint_cannot_aim_payment_at_the_platform_network(world, settings):
    """Merchant-supplied URLs: B's OWNER sets its integration's provider endpoint to a loopback
    service; payment must not call it (refused when set, or when the attempt is sent)."""
    from apps.payment import services as payment

    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = False
    b = world["b"]
    server = http.server.HTTPServer(("127.0.0.1", 0), _Listener)
    _Listener.reached = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_port}"
        answer = b.owner.client().patch(
            f"{PREFIXES['commerce']}/integrations/{b.ids['integration']}",
            {"settings": {"endpoint": endpoint}},
            format="json",
            HTTP_HOST="localhost",
        )
        if answer.status_code < 300:
            payment.attempt_send(attempt_id=int(b.ids["payment_attempt"]))
    finally:
        server.shutdown()
        server.server_close()
    assert not _Listener.reached, f"payment called {endpoint}{_Listener.reached[0]} for merchant B"
