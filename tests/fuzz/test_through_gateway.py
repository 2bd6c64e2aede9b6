"""Schema fuzzing through the gateway (issue 21, item 3): the same documents and checks as
test_schemas.py, sent over HTTP to a running all-in-one platform (`manage.py serve --gateway`: nginx
in front of granian, tests/checkout/platform.py) on a scratch database, unauthenticated and with
the token of a seller signed up over HTTP. What the in-process run cannot see is seen here: nginx's
own answers (rate limits, body and header limits, its error pages), the real token verification
against identity's published key set, and granian's HTTP handling. The gateway limits identity's
sign-in routes, outreach's public routes and inventory per address: 429 RATE_LIMITED is a documented
answer there. Slow (a platform of its own): `-m "not slow_fault"` skips it locally."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from tests.checkout.platform import new_seller, running_platform
from tests.fuzz.documents import CHECKS, http_schemas

pytestmark = pytest.mark.slow_fault
PORTS = range(19500, 19550)  # this test's gateway and servers (tests/bench/test_soak.py has 19450-19499)
MAX_EXAMPLES = 3  # per operation and caller, over HTTP: about 2,000 requests in all
SCHEMAS = http_schemas()


@pytest.fixture(scope="module")
def platform():
    with running_platform(ports=PORTS, roles="web,internal,gateway", consumers=False) as started:
        yield started


@pytest.fixture(scope="module")
def seller_token(platform) -> str:
    seller = new_seller(platform)
    seller.get("/v1/api/signal/notifications")  # asserts 200: the token verifies beyond identity (else every call is a 401)
    return seller.token


@pytest.fixture(params=["anonymous", "token"])
def headers(request) -> dict:
    if request.param == "anonymous":
        return {}
    return {"Authorization": f"Bearer {request.getfixturevalue('seller_token')}"}


@schemathesis.pytest.parametrize(**SCHEMAS)
@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_operation_answers_as_documented_through_the_gateway(case, platform, headers):
    case.call_and_validate(base_url=platform.base, headers=headers, checks=CHECKS, timeout=30)
