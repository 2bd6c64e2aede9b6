"""Authorization hardening (issue 22): the rules every service inherits from the kernel's policy
layer, checked through the policy test views (tests.identity.urls: `Widget.quantity` stands in for
the tenant, `created_by` is the owner)."""

from __future__ import annotations

import json
import pickle
import time

import pytest
from django.core.cache import cache, caches
from django.urls import URLResolver, get_resolver, reverse
from django_redis import get_redis_connection

from merchant_platform import policy
from merchant_platform.models import PolicyDefinition
from merchant_platform.policy import Grants, grants_for, load_grants, policy_seed_role_permissions, record_tenant
from merchant_platform.policy import cache as policy_cache
from merchant_platform.verification.jwks import JWKSCache, shared_copy_name
from tests.kernel.sample.models import Widget
from tests.support.auth import make_caller, new_signing_key, random_user_id

pytestmark = pytest.mark.django_db(databases="__all__")
WIDGETS = "/policy-test/widgets"
MERCHANT_A, MERCHANT_B = 7101, 7102


@pytest.fixture(autouse=True)
def policy_urls(settings):
    settings.ROOT_URLCONF = "tests.identity.urls"


def widget(merchant: int | None, *, created_by: int | None = None, name: str = "w") -> Widget:
    return Widget.objects.create(name=name, quantity=merchant, created_by=created_by)


def ids(response) -> set[str]:
    return {row["id"] for row in response.json()["results"]}


# --- 3. The owner rule ----------------------------------------------------------------------------


def test_owner_reaches_own_records_only_in_tenants_it_belongs_to():
    """OWNER held in merchant A no longer reaches its records in merchant B unless it belongs to B."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=[("OWNER", MERCHANT_A)])
    elsewhere = widget(MERCHANT_B, created_by=caller.user_id)
    client = caller.client()
    assert client.get(f"{WIDGETS}/{elsewhere.pk}").status_code == 404
    assert str(elsewhere.pk) not in ids(client.get(WIDGETS, {"pageSize": 200}))
    assert client.patch(f"{WIDGETS}/{elsewhere.pk}", {"name": "x"}, format="json").status_code == 404


def test_a_deny_in_the_records_tenant_wins_over_the_owner_rule():
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=["OWNER"], merchants=[MERCHANT_B], denied=[("test.Widget.update", MERCHANT_B)])
    own = widget(MERCHANT_B, created_by=caller.user_id)
    client = caller.client()
    assert client.get(f"{WIDGETS}/{own.pk}").status_code == 200
    assert client.patch(f"{WIDGETS}/{own.pk}", {"name": "x"}, format="json").status_code == 403


def test_owner_still_reaches_own_records_in_its_tenants_and_without_tenant():
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=[("OWNER", MERCHANT_A)], merchants=[MERCHANT_B])
    own_b, foreign_b = widget(MERCHANT_B, created_by=caller.user_id), widget(MERCHANT_B, created_by=random_user_id())
    client = caller.client()
    assert client.get(f"{WIDGETS}/{own_b.pk}").status_code == 200
    assert client.get(f"{WIDGETS}/{foreign_b.pk}").status_code == 404
    assert ids(client.get(WIDGETS, {"pageSize": 200})) >= {str(own_b.pk)}


def test_owner_held_everywhere_gives_only_the_owner_rule_where_the_caller_holds_a_role():
    """A seller (OWNER in `*`) made CASHIER of merchant B gets CASHIER's rights on B's records plus
    its own records there, not OWNER's baseline on every record of B."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"], "CASHIER": ["test.Widget.read"]})
    seller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT_B)])
    theirs, own = widget(MERCHANT_B, created_by=random_user_id()), widget(MERCHANT_B, created_by=seller.user_id)
    client = seller.client()
    assert client.get(f"{WIDGETS}/{theirs.pk}").status_code == 200  # CASHIER reads
    assert client.patch(f"{WIDGETS}/{theirs.pk}", {"name": "x"}, format="json").status_code == 403
    assert client.delete(f"{WIDGETS}/{theirs.pk}").status_code == 403
    assert client.post(f"{WIDGETS}/{theirs.pk}/archive").status_code == 403
    assert client.post(WIDGETS, {"name": "n", "quantity": MERCHANT_B}, format="json").status_code == 403
    assert client.patch(f"{WIDGETS}/{own.pk}", {"name": "x"}, format="json").status_code == 200  # the owner rule
    assert client.delete(f"{WIDGETS}/{own.pk}").status_code == 204


def test_owner_held_everywhere_keeps_its_baseline_in_the_merchants_it_joined_as_creator():
    """A merchant's creator joins it (join_domain, no role there): OWNER's baseline covers its records."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    seller = make_caller(roles=["OWNER"], merchants=[MERCHANT_A])
    record = widget(MERCHANT_A, created_by=None)
    assert seller.client().patch(f"{WIDGETS}/{record.pk}", {"name": "x"}, format="json").status_code == 200


def test_owner_held_everywhere_gets_only_the_owner_rule_where_it_is_a_plain_member():
    """A seller added to merchant B through identity's policy API (join_domain, not the creator): B's
    records created by others are out of reach, the ones it created stay its own."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    seller = make_caller(roles=["OWNER"])
    operator = make_caller(roles=["ADMIN"]).client()
    body = {"kind": "JOIN_DOMAIN", "subjectId": str(seller.user_id), "domain": str(MERCHANT_B)}
    forged = operator.post("/v1/api/identity/policies", {**body, "source": policy.MERCHANT_CREATE_SOURCE}, format="json")
    assert forged.status_code == 400  # the creator marker is not the request's to set
    response = operator.post("/v1/api/identity/policies", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["source"] == ""
    theirs, own = widget(MERCHANT_B), widget(MERCHANT_B, created_by=seller.user_id)
    client = seller.client()
    assert ids(client.get(WIDGETS)) == {str(own.pk)}
    assert client.get(f"{WIDGETS}/{theirs.pk}").status_code == 404
    assert client.patch(f"{WIDGETS}/{theirs.pk}", {"name": "x"}, format="json").status_code == 404
    assert client.delete(f"{WIDGETS}/{theirs.pk}").status_code == 404
    assert client.get(f"{WIDGETS}/{own.pk}").status_code == 200
    assert client.patch(f"{WIDGETS}/{own.pk}", {"name": "x"}, format="json").status_code == 200
    grants = grants_for(seller.user_id)  # read back from the cache: the same decision
    assert grants == load_grants(seller.user_id)
    assert not grants.allows("test.Widget", "read", str(MERCHANT_B))


def test_a_plain_membership_next_to_a_creator_one_keeps_them_apart():
    """The creator of A who joins B as a plain member keeps OWNER's baseline in A only."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    seller = make_caller(roles=["OWNER"], merchants=[MERCHANT_A], joined=[MERCHANT_B])
    grants = load_grants(seller.user_id)
    assert grants.allows("test.Widget", "update", str(MERCHANT_A))
    assert not grants.allows("test.Widget", "update", str(MERCHANT_B))
    assert grants.owner_allows("test.Widget", "update", str(MERCHANT_B))


def test_cached_grants_keep_where_a_role_is_held():
    """The decision read back from the Redis cache is the one computed from PostgreSQL."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Widget.*"]})
    caller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT_B)])
    assert grants_for(caller.user_id) == load_grants(caller.user_id)
    assert get_redis_connection("default").get(redis_name(f"authz:grants:{caller.user_id}")) is not None
    cached = grants_for(caller.user_id)
    assert not cached.allows("test.Widget", "update", str(MERCHANT_B))
    assert cached.owner_allows("test.Widget", "update", str(MERCHANT_B))


# --- 2. Resources without tenant ------------------------------------------------------------------


def test_writes_without_tenant_need_a_grant_everywhere():
    """A merchant's ADMIN or OWNER holds nothing in `*`: no write to a resource or record without tenant."""
    policy_seed_role_permissions(source="test", baseline={"OWNER": ["test.Gadget.*"]})
    merchant_admin = load_grants(make_caller(roles=[("ADMIN", MERCHANT_A)]).user_id)
    assert not merchant_admin.allows("test.Gadget", "create", None)
    merchant_owner = load_grants(make_caller(roles=[("OWNER", MERCHANT_A)]).user_id)
    assert merchant_owner.owner_allows("test.Gadget", "read")
    assert not merchant_owner.owner_allows("test.Gadget", "update")
    assert load_grants(make_caller(roles=["OWNER"]).user_id).owner_allows("test.Gadget", "update")


# --- 5. What Redis may be trusted with ------------------------------------------------------------


def redis_name(key: str) -> str:
    return cache.make_key(key)


def test_a_key_set_written_to_redis_by_someone_else_is_not_installed(settings):
    """Only a copy carrying the MAC of APP_ENV_APPLICATION_SECRET is trusted; a forged one is dropped."""
    attacker = new_signing_key()
    redis = get_redis_connection("default")
    settings.IDENTITY_JWKS_URL = "http://127.0.0.1:9/jw-certs"  # identity is down
    forgeries = [
        json.dumps({"keys": [attacker.public_jwk]}),  # the format of the old, unauthenticated copy
        json.dumps({"jwks": json.dumps({"keys": [attacker.public_jwk]}), "stored": int(time.time()), "mac": "forged"}),
        pickle.dumps(json.dumps({"keys": [attacker.public_jwk]})),  # what django-redis would have unpickled
    ]
    for forged in forgeries:
        redis.set(shared_copy_name(), forged)
        assert JWKSCache().key_for(attacker.kid) is None
        assert redis.get(shared_copy_name()) is None
    JWKSCache._store_shared_copy({"keys": [attacker.public_jwk]})
    stored = json.loads(redis.get(shared_copy_name()))
    secret = settings.APP_ENV_APPLICATION_SECRET
    settings.APP_ENV_APPLICATION_SECRET = "another-deployments-secret"  # a misconfigured process
    assert JWKSCache().key_for(attacker.kid) is None  # it does not read the copy made under the right secret
    JWKSCache._store_shared_copy({"keys": []})  # nor overwrite it (spec 7: nothing else breaks)
    settings.APP_ENV_APPLICATION_SECRET = secret
    assert json.loads(redis.get(shared_copy_name())) == stored
    assert JWKSCache().key_for(attacker.kid) is not None  # the genuine copy still serves an outage


def test_grants_written_to_redis_by_someone_else_are_not_served():
    """A forged cache entry granting SUPER_ADMIN is ignored and dropped; decisions come from PostgreSQL."""
    user_id = random_user_id()
    assert not grants_for(user_id).is_admin  # caches an authentic entry and the versions
    redis = get_redis_connection("default")
    name = redis_name(policy_cache._grants_key(user_id))
    entry = json.loads(redis.get(name))
    forged = Grants(user_id=user_id, roles=frozenset({("SUPER_ADMIN", "*")}), rules=(), domains=frozenset()).to_json()
    redis.set(name, json.dumps({**entry, "grants": forged}))
    assert not grants_for(user_id).is_admin
    redis.set(name, json.dumps({**entry, "grants": forged, "mac": "x"}))
    assert not grants_for(user_id).is_admin
    # Another user's authentic entry copied to this user's key does not hold either.
    admin = make_caller(roles=["SUPER_ADMIN"]).user_id
    assert grants_for(admin).is_admin
    redis.set(name, redis.get(redis_name(policy_cache._grants_key(admin))))
    assert not grants_for(user_id).is_admin


# --- 7. Unknown kids ------------------------------------------------------------------------------


def test_without_redis_a_process_that_runs_without_it_keeps_grants_in_process_briefly(monkeypatch):
    """Spec 1.3 (inventory): while Redis is down, grants are read from PostgreSQL and kept in process
    (AUTHZ_LOCAL_CACHE_TTL_SECONDS); a policy change made in this process clears them at once, one
    made elsewhere shows when the entry runs out."""
    monkeypatch.setattr(policy_cache, "redis_optional", lambda: True)
    monkeypatch.setitem(policy_cache._cache_state, "down_until", time.monotonic() + 60)  # Redis failed a moment ago
    caches["local"].clear()
    user, merchant = random_user_id(), str(random_user_id())
    policy.policy_join_domain(user_id=user, domain=merchant)
    assert not grants_for(user).allows("inventory.Stock", "read", merchant)
    # Another process's change: the row alone, no invalidation reaches this process.
    PolicyDefinition.objects.using(policy_cache.POLICY_DB).create(
        kind=PolicyDefinition.Kind.PERMISSION, subject_id=str(user), resource="inventory.Stock", action="read", domain=merchant
    )
    assert not grants_for(user).allows("inventory.Stock", "read", merchant)  # the entry kept in process
    caches["local"].clear()  # what its lifetime running out does
    assert grants_for(user).allows("inventory.Stock", "read", merchant)
    policy.policy_grant_permission(user_id=user, resource="inventory.Tracking", action="read", domain=merchant)
    assert grants_for(user).allows("inventory.Tracking", "read", merchant)  # this process's change: at once


def test_a_made_up_kid_is_not_refetched_but_a_new_real_kid_is_found_promptly(settings):
    """Per kid: a kid the key set did not hold is remembered; a new kid is fetched within the (short)
    spacing of fetches, with the defaults, however many made-up kids came before it."""
    rotated = new_signing_key()
    published = {"keys": []}
    fetches = []

    def source():
        fetches.append(time.monotonic())
        return published

    verifier = JWKSCache()
    verifier.set_local_source(source)
    assert verifier.key_for("made-up") is None
    assert len(fetches) == 1
    time.sleep(settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS + 0.05)
    for _ in range(20):
        assert verifier.key_for("made-up") is None  # the negative cache: no fetch for this kid
    assert len(fetches) == 1
    published = {"keys": [rotated.public_jwk]}
    assert verifier.key_for(rotated.kid) is not None  # a new kid: fetched at once
    assert len(fetches) == 2


# --- 1. Moving a record to another tenant ---------------------------------------------------------


def test_moving_a_record_needs_the_permission_in_the_target_tenant_too():
    """The kernel's serializers check it on their own (PolicyScopedMixin's write guard)."""
    row = widget(MERCHANT_A)
    merchant_admin = make_caller(roles=[("ADMIN", MERCHANT_A)]).client()
    moved = merchant_admin.patch(f"{WIDGETS}/{row.pk}", {"quantity": MERCHANT_B}, format="json")
    assert moved.status_code == 403
    row.refresh_from_db()
    assert row.quantity == MERCHANT_A
    assert merchant_admin.patch(f"{WIDGETS}/{row.pk}", {"quantity": MERCHANT_A, "name": "same"}, format="json").status_code == 200
    both = make_caller(roles=[("ADMIN", MERCHANT_A), ("ADMIN", MERCHANT_B)]).client()
    assert both.patch(f"{WIDGETS}/{row.pk}", {"quantity": MERCHANT_B}, format="json").status_code == 200
    row.refresh_from_db()
    assert row.quantity == MERCHANT_B


def _updatable_tenant_viewsets() -> dict[type, str]:
    """Every routed viewset with a tenant field and a PATCH or PUT on records: class -> route name."""
    found: dict[type, str] = {}

    def walk(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns)
                continue
            view_class = getattr(pattern.callback, "cls", None)
            actions = getattr(pattern.callback, "actions", None) or {}
            if getattr(view_class, "policy_tenant_field", None) and ({"patch", "put"} & set(actions)):
                found[view_class] = pattern.name

    walk(get_resolver("merchant_platform.urls").url_patterns)
    return found


def _license(merchant: int):
    from apps.licensing import seeds, services

    seeds.run()
    return services.license_create(owner_id=random_user_id(), merchant_id=merchant, activation_limit=1)


def _inquiry(merchant: int):
    from apps.outreach.models import Inquiry

    return Inquiry.objects.create(name="n", email="n@example.com", subject="s", message="m", merchant_id=merchant)


def _tax_group(merchant: int):
    from decimal import Decimal

    from apps.taxation import services

    return services.tax_group_create(merchant_id=merchant, name="g", items=[{"name": "VAT", "rate": Decimal(10)}])


def _rounding_policy(merchant: int):
    from apps.taxation import services

    return services.rounding_policy_set(merchant_id=merchant, mode="LINE")


def _inventory_location(merchant: int):
    from apps.inventory import services

    return services.location_create(merchant_id=merchant, name="Back room")


def _inventory_item(merchant: int):
    from apps.inventory import services

    return services.item_sync(variant_id=random_user_id(), merchant_id=merchant, sku=f"s-{random_user_id()}")


def _finance_account(merchant: int):
    from apps.finance import services

    return services.account_create(merchant_id=merchant, code=f"A{random_user_id()}", name="a", type="ASSET", currency="EUR")


def _payment_webhook(merchant: int):
    from apps.payment import services

    config, _secret = services.webhook_create(merchant_id=merchant, name="w", url="https://93.184.215.14/hooks", event_types=["*"])
    return config


# viewset (module.Class) -> (make a record in a tenant, the JSON key that names the tenant). A new
# viewset with a tenant field and a record write must be added here: the walk below refuses to skip it.
def _commerce_merchant(merchant: int):
    from apps.commerce.models import Merchant

    record, _ = Merchant.objects.get_or_create(
        id=merchant, defaults={"name": "m", "slug": f"m-{merchant}", "default_currency": "EUR", "country": "FR"}
    )
    return record


def _commerce_product(merchant: int):
    from apps.commerce import services

    return services.product_create(merchant_id=_commerce_merchant(merchant).id, name="p")


def _commerce_variant(merchant: int):
    from apps.commerce import services

    return services.variant_create(product_id=_commerce_product(merchant).id, sku=f"s-{random_user_id()}", price_amount=1, currency="EUR")


def _commerce_sale_order(merchant: int):
    from apps.commerce.sales import services

    variant = _commerce_variant(merchant)
    return services.order_create(merchant_id=variant.merchant_id, lines=[{"variant_id": variant.id, "quantity": 1}])


def _commerce_integration(merchant: int):
    from apps.commerce import services

    return services.integration_create(merchant_id=_commerce_merchant(merchant).id, code=f"P{random_user_id()}", credential="c")


MOVE_CASES = {
    "apps.commerce.views.IntegrationViewSet": (_commerce_integration, "merchantId"),
    "apps.commerce.sales.views.SaleOrderViewSet": (_commerce_sale_order, "merchantId"),
    "apps.commerce.views.MerchantViewSet": (_commerce_merchant, "id"),
    "apps.commerce.views.ProductViewSet": (_commerce_product, "merchantId"),
    "apps.commerce.views.VariantViewSet": (_commerce_variant, "merchantId"),
    "apps.inventory.views.ItemViewSet": (_inventory_item, "merchantId"),
    "apps.inventory.views.LocationViewSet": (_inventory_location, "merchantId"),
    "apps.finance.views.AccountViewSet": (_finance_account, "merchantId"),
    "apps.licensing.views.LicenseViewSet": (_license, "merchantId"),
    "apps.outreach.views.InquiryViewSet": (_inquiry, "merchantId"),
    "apps.taxation.views.TaxGroupViewSet": (_tax_group, "merchantId"),
    "apps.taxation.views.RoundingPolicyViewSet": (_rounding_policy, "merchantId"),
    "apps.payment.views.WebhookViewSet": (_payment_webhook, "merchantId"),
}


def test_every_tenant_viewset_refuses_a_cross_tenant_move():
    viewsets = _updatable_tenant_viewsets()
    assert viewsets, "no routed viewset with a tenant field was found"
    names = {f"{view_class.__module__}.{view_class.__qualname__}": (view_class, route) for view_class, route in viewsets.items()}
    missing = sorted(set(names) - set(MOVE_CASES))
    assert not missing, f"add these viewsets to MOVE_CASES: {missing}"
    merchant_admin = make_caller(roles=[("ADMIN", MERCHANT_A)]).client()
    for name, (view_class, route) in names.items():
        make, key = MOVE_CASES[name]
        record = make(MERCHANT_A)
        url = reverse(route, kwargs={view_class.lookup_url_kwarg or view_class.lookup_field: record.pk})
        for target in (MERCHANT_B, None):
            response = merchant_admin.patch(url, {key: None if target is None else str(target)}, format="json")
            assert 400 <= response.status_code < 500, (name, target, response.status_code)
            record.refresh_from_db()
            assert record_tenant(record, view_class.policy_tenant_field) == MERCHANT_A, (name, target)
