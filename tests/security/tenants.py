"""Two merchants with one record of every kind each (the hostile-tenant sweep's world), and the
snapshot of every service table the sweep compares before and after each request.

Records are made through each service's own functions, as its API or its consumers make them
(an event-borne record through the function its consumer calls); the few that only a provider or a
delivery run would create (a payment attempt, a webhook delivery) are written as those runs write
them."""

from __future__ import annotations

import datetime
import itertools
import secrets
from dataclasses import dataclass, field

from django.contrib.auth.hashers import make_password
from django.db import connections

from tests.commerce.test_media import png
from tests.support.auth import Caller, make_caller, random_user_id

_counter = itertools.count(1)

# Bookkeeping tables that a refused request may legitimately touch (or that hold no tenant data).
BOOKKEEPING_SUFFIXES = ("outboxmessage", "processedmessage", "idempotency_key", "django_migrations", "django_session")
# Columns a read may refresh without changing the record.
VOLATILE_COLUMNS = ("updated_at", "last_validated_at", "last_seen_at")


@dataclass
class Tenant:
    """A merchant, its OWNER, CASHIER and ADMIN, and the id of one record of every kind (kind -> id)."""

    merchant_id: int
    owner: Caller
    cashier: Caller
    admin: Caller
    ids: dict[str, str] = field(default_factory=dict)
    provider_secret: str = ""  # the merchant's QR integration credential: it signs the provider's IPNs


def identity_user(label: str):
    from apps.identity.models import User

    user_id = random_user_id()
    return User.objects.create(id=user_id, email=f"sweep-{label}-{user_id}@example.com", password_hash=make_password(None))


def seed_tenant(label: str) -> Tenant:
    """A merchant whose OWNER created every record below, and a CASHIER and an ADMIN of the merchant."""
    from apps.commerce import services as commerce
    from apps.commerce.sales import services as sales
    from apps.finance import services as finance
    from apps.inventory import services as inventory
    from apps.inventory.models import Stock, Tracking
    from apps.ledger import services as ledger
    from apps.licensing import services as licensing
    from apps.outreach import services as outreach
    from apps.outreach.models import Subscriber
    from apps.payment.models import PaymentAttempt, PaymentTransaction, Refund, WebhookConfig, WebhookDelivery
    from apps.signal import services as signal
    from apps.taxation import services as taxation
    from merchant_platform.models import PolicyDefinition

    n = next(_counter)
    owner_user = identity_user(f"{label}-owner")
    cashier_user = identity_user(f"{label}-cashier")
    admin_user = identity_user(f"{label}-admin")
    merchant = commerce.merchant_create(
        name=f"Sweep {label}", slug=f"sweep-{label}-{secrets.token_hex(4)}", default_currency="EUR", country="FR", created_by=owner_user.id
    )
    m = merchant.id
    owner = make_caller(roles=[("OWNER", m)], merchants=[m], user_id=owner_user.id)
    cashier = make_caller(roles=[("CASHIER", m)], merchants=[m], user_id=cashier_user.id)
    admin = make_caller(roles=[("ADMIN", m)], merchants=[m], user_id=admin_user.id)
    by = owner.user_id
    ids: dict[str, object] = {"merchant": m, "user": owner_user.id}
    ids["policy"] = PolicyDefinition.objects.filter(subject_id=str(by), domain=str(m), kind="ROLE").values_list("pk", flat=True).first()

    # taxation: a group (the product names it), the merchant's rounding policy, the product's tax set
    group = taxation.tax_group_create(merchant_id=m, name=f"VAT {label}", items=[{"name": "VAT", "rate": "0.2"}], created_by=by)
    ids["tax_group"] = group.id
    ids["rounding_policy"] = taxation.rounding_policy_set(merchant_id=m, mode="DOCUMENT").id

    # commerce: the catalogue, an integration, a media, a sale order
    product = commerce.product_create(merchant_id=m, name=f"Lamp {label}", status="ACTIVE", tax_group_id=group.id, created_by=by)
    variant = commerce.variant_create(product_id=product.id, sku=f"SW-{label}-{n}", price_amount=1250, currency="EUR", unit_cost_amount=500)
    ids.update(product=product.id, variant=variant.id)
    provider_secret = secrets.token_hex(16)
    ids["integration"] = commerce.integration_create(merchant_id=m, code="QR", credential=provider_secret, created_by=by).id
    ids["media"] = commerce.media_upload(product_id=product.id, data=png(), filename="lamp.png", created_by=by).id
    ids["tax_set"] = taxation.tax_set_provision(product_id=product.id, tax_group_id=group.id, merchant_id=m).tax_set.id

    # finance: the default chart (MERCHANT stream), a voucher and its lines
    accounts = {a.system_role: a for a in finance.accounts_ensure_defaults(merchant_id=m, currency="EUR")}
    cash = next(a for role, a in accounts.items() if role == "CASH")
    sales_account = next(a for role, a in accounts.items() if role == "SALES")
    voucher = finance.voucher_post(
        merchant_id=m,
        kind="SALE",
        lines=[{"account_id": cash.id, "debit": 1000}, {"account_id": sales_account.id, "credit": 1000}],
        created_by=by,
    )
    ids.update(finance_account=cash.id, voucher=voucher.id, finance_transaction=voucher.lines.order_by("pk").first().id)

    order = sales.order_create(merchant_id=m, lines=[{"variant_id": variant.id, "quantity": 1}], finance_account_id=cash.id, created_by=by)
    ids["sale_order"] = order.id

    # inventory: the default location (MERCHANT stream), the variant's item (PRODUCT_VARIANT stream), stock
    inventory.location_ensure_default(merchant_id=m)
    item = inventory.item_sync(
        variant_id=variant.id, merchant_id=m, product_id=product.id, sku=variant.sku, currency="EUR", unit_cost_amount=500
    )
    inventory.stock_adjust(item_id=item.id, delta=10, reason="initial stock", created_by=by)
    ids["location"] = inventory.location_create(merchant_id=m, name=f"Back room {label}", created_by=by).id
    inventory.stock_adjust(item_id=item.id, delta=5, reason="back room stock", location_id=ids["location"], created_by=by)
    ids["item"] = item.id
    ids["stock"] = Stock.objects.filter(item_id=item.id).values_list("pk", flat=True).first()
    ids["tracking"] = Tracking.objects.filter(item_id=item.id).values_list("pk", flat=True).first()
    ids["ticket"] = inventory.ticket_create(item_id=item.id, created_by=by).id
    ids["purchase_order"] = inventory.purchase_order_create(
        merchant_id=m, supplier="Acme", currency="EUR", lines=[{"item_id": item.id, "quantity": 2, "unit_cost_amount": 400}], created_by=by
    ).id
    inventory.reservation_reserve(order_id=str(order.id), merchant_id=m, lines=[{"line_id": "1", "item_id": item.id, "quantity": 1}])
    ids["reservation_order"] = str(order.id)

    # ledger: a report job
    today = datetime.date.today()
    ids["ledger"] = ledger.job_create(merchant_id=m, type="GENERAL_LEDGER", format="CSV", period=f"{today:%Y-%m}", created_by=by).id

    # payment: a transaction with its attempt (sale side), a refund of it, a webhook and one delivery (the delivery run)
    transaction = PaymentTransaction.objects.create(
        merchant_id=m, source_id=str(order.id), amount=1500, currency="EUR", finance_account_id=cash.id, created_by=by
    )
    attempt = PaymentAttempt.objects.create(
        transaction=transaction, merchant_id=m, channel="QR", code=f"SW{label}{secrets.token_hex(6)}", amount=1500
    )
    webhook = WebhookConfig.objects.create(
        merchant_id=m,
        name=f"hook {label}",
        url="https://example.com/hook",
        event_types=["transaction.settled"],
        secret="sealed",
        created_by=by,
    )
    delivery = WebhookDelivery.objects.create(
        webhook=webhook, merchant_id=m, message_id=f"msg_{secrets.token_hex(8)}", event_type="transaction.settled", payload={}
    )
    refund = Refund.objects.create(
        transaction=transaction,
        attempt=attempt,
        merchant_id=m,
        channel="QR",
        code=f"SR{label}{secrets.token_hex(6)}",
        amount=500,
        currency="EUR",
        reason="sweep",
    )
    ids.update(
        payment_transaction=transaction.id,
        payment_attempt=attempt.id,
        payment_refund=refund.id,
        webhook=webhook.id,
        webhook_delivery=delivery.id,
    )

    # licensing: a license of the merchant with a seat
    ids["licensing_policy"] = licensing.policy_create(code=f"SWEEP-{label}-{n}", name=f"Plan {label}", created_by=by).id
    license = licensing.license_create(owner_id=by, merchant_id=m, name=f"License {label}", perpetual=True, created_by=by)
    ids["license"] = license.id
    ids["activation"] = licensing.activation_create(license_id=license.id, fingerprint=f"fp-{label}-{n}", created_by=by).id

    # signal: a notification of the owner in the merchant's room
    note = signal.notification_store(
        recipient_id=by, topic="order.paid", room=f"merchant.{m}.commerce", title="Paid", data={"merchantId": str(m)}
    )
    ids["notification"] = note.id

    # outreach: an inquiry to the merchant, and a subscriber the owner created
    outreach.inquiry_submit(name="Ann", email=f"ann-{label}@example.com", subject="Hello", message="Hi", merchant_id=m)
    from apps.outreach.models import Inquiry

    ids["inquiry"] = Inquiry.objects.filter(merchant_id=m).values_list("pk", flat=True).first()
    ids["subscriber"] = outreach.subscriber_create(email=f"sub-{label}-{n}@example.com", created_by=by).id
    assert Subscriber.objects.filter(pk=ids["subscriber"]).exists()

    missing = [kind for kind, value in ids.items() if value is None]
    assert not missing, f"seeding made no {missing}"
    return Tenant(
        merchant_id=m,
        owner=owner,
        cashier=cashier,
        admin=admin,
        ids={kind: str(value) for kind, value in ids.items()},
        provider_secret=provider_secret,
    )


def service_tables() -> list[tuple[str, str, str]]:
    """(alias, schema, table) of every table each service owns, bookkeeping left out."""
    from merchant_platform.registry import active_services

    found = []
    for service in active_services():
        with connections[service.db_alias].cursor() as cursor:
            cursor.execute(
                "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = ANY(%s) AND table_type = 'BASE TABLE'",
                [list(service.schemas)],
            )
            found += [(service.db_alias, schema, table) for schema, table in cursor.fetchall() if not table.endswith(BOOKKEEPING_SUFFIXES)]
    return sorted(set(found))


def snapshot(tables: list[tuple[str, str, str]]) -> dict[tuple[str, str], set[str]]:
    """Every row of every table as JSON text (volatile columns left out), per table."""
    rows: dict[tuple[str, str], set[str]] = {}
    drop = " ".join(f"- '{column}'" for column in VOLATILE_COLUMNS)
    for alias, schema, table in tables:
        with connections[alias].cursor() as cursor:
            cursor.execute(f'SELECT (to_jsonb(t) {drop})::text FROM "{schema}"."{table}" t')
            rows[(schema, table)] = {row[0] for row in cursor.fetchall()}
    return rows


def changes(before: dict, after: dict, merchant_id: int, *, public: bool = False) -> list[str]:
    """What a request changed of merchant A's: a row that was there before and is gone or different
    (any tenant's, since B's request may not change anything through A's ids either; for a `public`
    operation, which B may make, only A's rows), or (unless `public`) a new row that names merchant A
    anywhere."""
    found = []
    marker = str(merchant_id)  # a snowflake: in any column (merchant_id, principal_id, a room name...)
    for key, rows in after.items():
        old = before.get(key, set())
        found += [f"{key[1]}: changed or removed {row[:200]}" for row in old - rows if not public or marker in row]
        found += [f"{key[1]}: new row of A {row[:200]}" for row in rows - old if not public and marker in row]
    return found
