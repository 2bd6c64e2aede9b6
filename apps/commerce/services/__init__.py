"""Every write of commerce, by aggregate: merchants.py, products.py, variants.py (the catalog),
integrations.py (provider integrations, credentials sealed), media.py (product images in S3),
search_index.py (the search documents the sync worker and `reindex_products` write) and caches.py
(the footer-summary cache and the search staleness marks in Redis); records.py holds what they share.
Functions take ids and keyword arguments, run in one transaction on commerce's alias (integrations:
`default`, their table is the shared `public` one) and raise the kernel's errors, so the API, the
admin, consumers and tasks share the same rules. Callers import this package: it names what they use.

Change streams need no code here: the CDC relay reads the committed rows of `merchant`, `product`
and `product_variant` from the WAL (apps/commerce/cdc.py, docs/events.md)."""

from apps.commerce.services.caches import merchant_summary, search_changed, search_indexed, summary_retire
from apps.commerce.services.integrations import integration_create, integration_delete, integration_update
from apps.commerce.services.media import media_delete, media_sweep, media_upload
from apps.commerce.services.merchants import merchant_create, merchant_delete, merchant_restore, merchant_update
from apps.commerce.services.products import product_create, product_delete, product_restore, product_update, tax_group_check
from apps.commerce.services.records import DB, amount_too_large, check_attributes, summary_changed
from apps.commerce.services.search_index import REINDEX_BATCH, search_reindex, search_sync_products
from apps.commerce.services.variants import variant_create, variant_delete, variant_update

__all__ = (
    "DB",
    "REINDEX_BATCH",
    "amount_too_large",
    "check_attributes",
    "integration_create",
    "integration_delete",
    "integration_update",
    "media_delete",
    "media_sweep",
    "media_upload",
    "merchant_create",
    "merchant_delete",
    "merchant_restore",
    "merchant_summary",
    "merchant_update",
    "product_create",
    "product_delete",
    "product_restore",
    "product_update",
    "search_changed",
    "search_indexed",
    "search_reindex",
    "search_sync_products",
    "summary_changed",
    "summary_retire",
    "tax_group_check",
    "variant_create",
    "variant_delete",
    "variant_update",
)
