"""`manage.py resync_tax`: provision every product from commerce's API, on purpose.

The product stream starts at `latest` (spec 6.2: no backfill), so products changed while taxation
was not consuming, or before it first ran, are not provisioned by it. This command reads the
products through commerce's API (GET <TAXATION_COMMERCE_URL>/products, HTTP Basic service
credentials, page by page in id order) and applies each as the stream would (services.product_apply:
idempotent). With --deprovision-missing, the active tax sets of products the API no longer lists
(deleted products) are deactivated too, once every page was read.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.taxation import services
from apps.taxation.models import TaxSet
from merchant_platform.errors import ApiError
from merchant_platform.http import session
from merchant_platform.logging import get_logger
from merchant_platform.verification.service_accounts import basic_auth_header

log = get_logger(__name__)
PAGE_SIZE = 200


class Command(BaseCommand):
    help = "Provision or deprovision every product as commerce's API lists it (a deliberate backfill)."

    def add_arguments(self, parser):
        parser.add_argument("--merchant", type=int, help="only this merchant's products")
        parser.add_argument("--commerce-url", default=None, help="commerce's API prefix (default TAXATION_COMMERCE_URL)")
        parser.add_argument("--deprovision-missing", action="store_true", help="deactivate the tax sets of products no longer listed")

    def handle(self, *args, merchant, commerce_url, deprovision_missing, **options):
        counts = {
            outcome: 0 for outcome in (services.PROVISIONED, services.ALREADY_PROVISIONED, services.DEPROVISIONED, services.NOT_PROVISIONED)
        }
        failed: list[str] = []
        seen: set[int] = set()
        for product in self._products(commerce_url or settings.TAXATION_COMMERCE_URL, merchant):
            product_id = int(product["id"])
            seen.add(product_id)
            try:
                result = services.product_apply(
                    product_id=product_id,
                    merchant_id=int(product["merchantId"]),
                    tax_group_id=int(product["taxGroupId"]) if product.get("taxGroupId") else None,
                    source=services.RESYNC,
                )
            except ApiError as exc:  # logged at error level by the service; the others still run
                failed.append(f"{product_id}: {exc.detail}")
                continue
            counts[result.outcome] += 1
        if deprovision_missing:
            active = TaxSet.objects.filter(status=TaxSet.Status.ACTIVE)
            if merchant is not None:
                active = active.filter(merchant_id=merchant)
            for product_id in set(active.values_list("product_id", flat=True)) - seen:
                counts[services.tax_set_deprovision(product_id=product_id, source=services.RESYNC).outcome] += 1
        log.info("taxation.resync.done", products=len(seen), failed=len(failed), **counts)
        summary = ", ".join(f"{outcome.lower()}={count}" for outcome, count in counts.items())
        self.stdout.write(f"products={len(seen)} {summary} failed={len(failed)}")
        for line in failed:
            self.stderr.write(f"not provisioned: {line}")
        if failed:
            raise CommandError(f"{len(failed)} product(s) could not be provisioned")

    def _products(self, base_url: str, merchant: int | None):
        params = {"pageSize": PAGE_SIZE, "ordering": "id"}
        if merchant is not None:
            params["merchantId"] = merchant
        url: str | None = f"{base_url}/products"
        client = session()
        while url:
            response = client.get(url, params=params, headers={"Authorization": basic_auth_header()})
            if response.status_code != 200:
                raise CommandError(f"commerce answered {response.status_code} for {response.url}")
            page = response.json()
            yield from page["results"]
            url, params = page.get("next"), None  # `next` carries the query
