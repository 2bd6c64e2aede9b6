"""Tenant isolation sweep (issue 21, item 4), generated from the URL configuration: for every route
of every service that names one record (detail routes and their detail actions), a record made in
merchant A is asked for by merchant B's administrator, with GET and with each write the route takes
(an empty body): every answer is 404 and the record is unchanged. Merchant A's administrator reads
the same record (200), so the 404s are the tenant's doing, not a wrong id.

A new route with an id must be added to CASES (or, if it names no tenant's record, to NOT_ENTITIES
with the reason): the walk refuses to skip it."""

from __future__ import annotations

import datetime

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from merchant_platform.registry import active_services
from merchant_platform.seeds import run_seeds
from tests.kernel.test_authorization import (
    _commerce_integration,
    _commerce_merchant,
    _commerce_product,
    _commerce_variant,
    _finance_account,
    _inquiry,
    _inventory_item,
    _inventory_location,
    _license,
    _payment_webhook,
    _rounding_policy,
    _tax_group,
)
from tests.support.auth import make_caller, random_user_id

pytestmark = pytest.mark.django_db(databases="__all__")
MERCHANT_A, MERCHANT_B = 7_401_000_000_000_001, 7_401_000_000_000_002
WRITES = ("post", "put", "patch", "delete")


# --- Record factories: each makes one record of `merchant`; `user` is merchant A's administrator ---


def _identity_user(merchant: int, user: int):
    from django.contrib.auth.hashers import make_password

    from apps.identity.models import User

    user_id = random_user_id()
    return User.objects.create(id=user_id, email=f"u{user_id}@example.com", password_hash=make_password(None))


def _identity_policy(merchant: int, user: int):
    from merchant_platform.policy import policy_grant_role

    return policy_grant_role(user_id=random_user_id(), role="EMPLOYEE", domain=merchant)


def _media(merchant: int, user: int):
    from apps.commerce import services
    from tests.commerce.test_media import png

    return services.media_upload(product_id=_commerce_product(merchant).id, data=png(), filename="p.png")


def _sale_order(merchant: int, user: int):
    from apps.commerce.sales import services

    return services.order_create(merchant_id=merchant, lines=[{"variant_id": _commerce_variant(merchant).id, "quantity": 1}])


def _voucher(merchant: int, user: int):
    from apps.finance import services

    cash, sales = (_finance_account(merchant) for _ in range(2))
    return services.voucher_post(
        merchant_id=merchant,
        kind="ADJUSTMENT",
        reason="correction",
        lines=[{"account_id": cash.id, "debit": 5}, {"account_id": sales.id, "credit": 5}],
    )


def _finance_line(merchant: int, user: int):
    return _voucher(merchant, user).lines.first()


def _tracking(merchant: int, user: int):
    from apps.inventory import services

    return services.stock_adjust(item_id=_inventory_item(merchant).id, delta=5, reason="sweep")


def _stock(merchant: int, user: int):
    from apps.inventory.models import Stock

    tracking = _tracking(merchant, user)
    return Stock.objects.get(item_id=tracking.item_id, location_id=tracking.location_id)


def _ticket(merchant: int, user: int):
    from apps.inventory import services

    return services.ticket_create(item_id=_inventory_item(merchant).id)


def _purchase_order(merchant: int, user: int):
    from apps.inventory import services

    lines = [{"item_id": _inventory_item(merchant).id, "quantity": 2, "unit_cost_amount": 100}]
    return services.purchase_order_create(merchant_id=merchant, supplier="s", currency="EUR", lines=lines)


def _ledger_job(merchant: int, user: int):
    from apps.ledger import services

    month = datetime.date.today().strftime("%Y-%m")
    return services.job_create(merchant_id=merchant, type="TRIAL_BALANCE", format="CSV", period=month)


def _tax_set(merchant: int, user: int):
    from apps.taxation import services

    return services.tax_set_provision(product_id=random_user_id(), tax_group_id=_tax_group(merchant).id).tax_set


def _notification(merchant: int, user: int):
    from apps.signal import services

    return services.notification_store(recipient_id=user, topic="sweep")


def _payment_transaction(merchant: int, user: int):
    from apps.payment import services

    return services.transaction_create(merchant_id=merchant, source_id=f"s-{random_user_id()}", amount=100, currency="EUR").transaction


def _payment_attempt(merchant: int, user: int):
    return _payment_transaction(merchant, user).attempts.first()


def _payment_refund(merchant: int, user: int):
    """A refund as payment records one (PENDING, through the transaction's attempt)."""
    from apps.payment.models import Refund

    attempt = _payment_attempt(merchant, user)
    return Refund.objects.create(
        transaction_id=attempt.transaction_id,
        attempt=attempt,
        merchant_id=merchant,
        channel=attempt.channel,
        code=f"R{random_user_id()}",
        amount=100,
        currency="EUR",
        reason="sweep",
    )


def _webhook_delivery(merchant: int, user: int):
    from apps.payment.models import WebhookDelivery

    webhook = _payment_webhook(merchant)
    return WebhookDelivery.objects.create(
        webhook=webhook, merchant_id=merchant, message_id=f"m{random_user_id()}", event_type="sweep", payload={}
    )


def _activation(merchant: int, user: int):
    from apps.licensing import services

    return services.activation_create(license_id=_license(merchant).id, fingerprint=f"f{random_user_id()}")


def _licensing_policy(merchant: int, user: int):
    from apps.licensing import services

    return services.policy_create(code=f"P{random_user_id()}", name="p")


def _subscriber(merchant: int, user: int):
    from apps.outreach import services

    return services.subscriber_create(email=f"s{random_user_id()}@example.com")


def _tenant(make):
    """A factory of test_authorization (one argument, the merchant) as a factory of this sweep."""
    return lambda merchant, user: make(merchant)


# viewset (module.Class) -> factory. Every route with an id of the viewset is swept with it.
CASES = {
    "apps.identity.views.PolicyViewSet": _identity_policy,
    "apps.commerce.views.MerchantViewSet": _tenant(_commerce_merchant),
    "apps.commerce.views.ProductViewSet": _tenant(_commerce_product),
    "apps.commerce.views.VariantViewSet": _tenant(_commerce_variant),
    "apps.commerce.views.MediaViewSet": _media,
    "apps.commerce.views.IntegrationViewSet": _tenant(_commerce_integration),
    "apps.commerce.sales.views.SaleOrderViewSet": _sale_order,
    "apps.finance.views.AccountViewSet": _tenant(_finance_account),
    "apps.finance.views.VoucherViewSet": _voucher,
    "apps.finance.views.LineViewSet": _finance_line,
    "apps.inventory.views.LocationViewSet": _tenant(_inventory_location),
    "apps.inventory.views.ItemViewSet": _tenant(_inventory_item),
    "apps.inventory.views.StockViewSet": _stock,
    "apps.inventory.views.TrackingViewSet": _tracking,
    "apps.inventory.views.TicketViewSet": _ticket,
    "apps.inventory.views.PurchaseOrderViewSet": _purchase_order,
    "apps.ledger.views.LedgerJobViewSet": _ledger_job,
    "apps.taxation.views.TaxGroupViewSet": _tenant(_tax_group),
    "apps.taxation.views.TaxSetViewSet": _tax_set,
    "apps.taxation.views.RoundingPolicyViewSet": _tenant(_rounding_policy),
    "apps.signal.views.NotificationViewSet": _notification,
    "apps.payment.views.TransactionViewSet": _payment_transaction,
    "apps.payment.views.AttemptViewSet": _payment_attempt,
    "apps.payment.views.TransactionRefundViewSet": _payment_transaction,  # the transaction's refunds
    "apps.payment.views.RefundViewSet": _payment_refund,
    "apps.payment.views.WebhookViewSet": _tenant(_payment_webhook),
    "apps.payment.views.DeliveryViewSet": _webhook_delivery,
    "apps.licensing.views.LicenseViewSet": _tenant(_license),
    "apps.licensing.views.ActivationViewSet": _activation,
    "apps.outreach.views.InquiryViewSet": _tenant(_inquiry),
}

# Records that belong to no merchant: the platform's operators manage them. Merchant B's
# administrator is refused (401 for service-only routes, 403 or 404) like any merchant's.
PLATFORM_CASES = {
    "apps.identity.views.UserViewSet": _identity_user,
    "apps.identity.views.InternalUserViewSet": _identity_user,  # platform services only (HTTP Basic)
    "apps.licensing.views.PolicyViewSet": _licensing_policy,  # the licensing plans of the platform
    "apps.outreach.views.SubscriberViewSet": _subscriber,  # the platform's newsletter
}

# A valid body for the writes that check their input before they look the record up (an empty body
# would be refused with 400 whoever asks).
BODIES = {
    "licensing-license-validate": {"fingerprint": "sweep"},
    "payment-transaction-refund-list": {"amount": 100, "currency": "EUR", "reason": "sweep"},
}

# Routes with a path parameter that is not a record's id, and why.
NOT_ENTITIES = {
    "identity-otp-request": "the parameter is the OTP namespace (verify-email, phone-auth, forgot-password)",
    "commerce-payment-webhook": "payment's signed webhook into commerce: the merchant id is checked against the signature",
}


def _routes() -> list[tuple[str, URLPattern, str]]:
    """(path, pattern, route name) of every service route with a path parameter."""
    prefixes = tuple(service.prefix.strip("/") + "/" for service in active_services())
    found = []

    def walk(patterns, prefix: str):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif pattern.pattern.regex.groupindex and (prefix + str(pattern.pattern)).startswith(prefixes):
                found.append((prefix + str(pattern.pattern), pattern, pattern.name))

    walk(get_resolver().url_patterns, "")
    return found


def _viewset(pattern: URLPattern) -> str:
    view_class = pattern.callback.cls
    return f"{view_class.__module__}.{view_class.__qualname__}"


def _snapshot(record) -> list[dict]:
    return list(type(record)._base_manager.using(record._state.db).filter(pk=record.pk).values())


def test_every_single_record_route_hides_other_tenants_records():
    run_seeds()
    for merchant in (MERCHANT_A, MERCHANT_B):
        _commerce_merchant(merchant)
    owner_a = make_caller(roles=[("ADMIN", MERCHANT_A)], merchants=[MERCHANT_A])
    admin_b = make_caller(roles=[("ADMIN", MERCHANT_B)], merchants=[MERCHANT_B])
    routes = _routes()
    assert len(routes) > 40, "the walk found too few routes"
    uncovered = sorted(
        f"{name} ({path})"
        for path, pattern, name in routes
        if name not in NOT_ENTITIES and (not hasattr(pattern.callback, "cls") or _viewset(pattern) not in CASES | PLATFORM_CASES)
    )
    assert not uncovered, f"add these routes' viewsets to CASES or PLATFORM_CASES, or the routes to NOT_ENTITIES: {uncovered}"
    swept, leaks = [], []
    for _path, pattern, name in routes:
        if name in NOT_ENTITIES:
            continue
        viewset = _viewset(pattern)
        tenant = viewset in CASES
        record = (CASES | PLATFORM_CASES)[viewset](MERCHANT_A, owner_a.user_id)
        [parameter] = pattern.pattern.regex.groupindex  # pk, or the parent's id of a nested route
        url = reverse(name, kwargs={parameter: record.pk})
        allowed = set(pattern.callback.cls.http_method_names)
        methods = [method for method in pattern.callback.actions if method in allowed]
        if tenant and "get" in methods:
            assert owner_a.client().get(url).status_code != 404, (name, "merchant A reaches its own record")
        before = _snapshot(record)
        for method in methods:
            call = getattr(admin_b.client(), method)
            response = call(url, BODIES.get(name, {}), format="json") if method in WRITES else call(url)
            if response.status_code not in ({404} if tenant else {401, 403, 404}):
                leaks.append((name, method.upper(), response.status_code, response.content[:200]))
            swept.append((name, method))
        if _snapshot(record) != before:
            leaks.append((name, "merchant B changed merchant A's record"))
    assert not leaks
    assert {name for name, _method in swept} == {name for _path, _pattern, name in routes} - set(NOT_ENTITIES)
