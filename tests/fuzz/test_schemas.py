"""Schema fuzzing (issue 21, item 3): schemathesis generates requests from every service's OpenAPI
document and sends them, unauthenticated and with a valid token, to the platform's WSGI application
in-process. Every answer must be below 500, have a documented status and content type, match its
documented schema, and every error must be a problem document (merchant_platform.errors.problem).

In-process rather than through nginx and granian: the requests then run inside the test's database
transaction (the merchant and the policies made for the test are visible, nothing is left behind)
and the tokens minted by tests.support.auth verify against the key pinned in this process. The
same documents are fuzzed over HTTP through the gateway in test_through_gateway.py; the gateway's
own answers are covered by tests/tooling/test_gateway.py.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from tests.fuzz.documents import CHECKS, MAX_EXAMPLES, wsgi_schemas
from tests.support.auth import make_caller, random_user_id
from tests.support.database import seeded_module_transaction

SCHEMAS = wsgi_schemas()
MERCHANT = 7_301_000_000_000_001


def new_account():
    """A signed-up user who never signed in (identity's account row of the caller)."""
    from django.contrib.auth.hashers import make_password

    from apps.identity.models import User

    user_id = random_user_id()
    return User.objects.create(id=user_id, email=f"fuzz-{user_id}@example.com", password_hash=make_password(None))


@pytest.fixture(scope="module")
def merchant(django_db_setup, django_db_blocker) -> int:
    """The seeds and a merchant, made once for the module inside a transaction on every database
    that is rolled back at its end (each test's own transaction nests in it)."""
    from apps.commerce.models import Merchant

    with seeded_module_transaction(django_db_blocker):
        Merchant.objects.create(id=MERCHANT, name="Fuzz", slug="fuzz", default_currency="EUR", country="FR")
        yield MERCHANT


@pytest.fixture
def merchant_admin(merchant, db) -> str:
    """A token whose user (an identity account) is ADMIN of the merchant."""
    return make_caller(roles=[("ADMIN", merchant)], merchants=[merchant], user_id=new_account().id).token


@pytest.fixture(params=["anonymous", "token"])
def headers(request) -> dict:
    if request.param == "anonymous":
        return {}
    return {"Authorization": f"Bearer {request.getfixturevalue('merchant_admin')}"}


@schemathesis.pytest.parametrize(**SCHEMAS)
@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@pytest.mark.django_db(databases="__all__")
def test_every_operation_answers_as_documented(case, merchant, headers):
    case.call_and_validate(headers=headers, checks=CHECKS)


@pytest.mark.django_db(databases="__all__")
def test_a_user_who_never_signed_in_matches_the_document():
    """Issue 21: `lastSignInAt` is null until the first sign-in, and the document says it may be."""
    caller = make_caller(user_id=new_account().id)
    me = caller.client().get("/v1/api/identity/users/me")
    assert me.status_code == 200 and me.json()["lastSignInAt"] is None
    user = SCHEMAS["identity"].raw_schema["components"]["schemas"]["User"]
    assert user["properties"]["lastSignInAt"].get("nullable") is True
