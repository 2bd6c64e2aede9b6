"""Every write of the commerce service: merchants, the catalog (products and variants), provider
integrations, product media and the search index. Functions take ids and keyword arguments, run in
one transaction on commerce's alias (integrations: `default`, their table is the shared `public`
one) and raise the kernel's errors, so the API, the admin, consumers and tasks share the same rules.

Change streams need no code here: the CDC relay reads the committed rows of `merchant`, `product`
and `product_variant` from the WAL (apps/commerce/cdc.py, docs/events.md)."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.conf import settings as django_settings
from django.contrib.postgres.search import SearchVector
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.utils import timezone

from apps.commerce import selectors, storage
from apps.commerce.codes import COUNTRIES, CURRENCIES
from apps.commerce.models import ATTRIBUTES_MAX_BYTES, Merchant, Product, ProductMedia, ProductSearchDocument, ProductVariant
from merchant_platform import outbound, references
from merchant_platform import policy as authorization
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.integrations import seal_credential
from merchant_platform.models import Configuration
from merchant_platform.money import AMOUNT_TOO_LARGE, MAX_AMOUNT

DB = "commerce"
SOURCE = "commerce"  # the policy rows commerce writes name it


def _locked(model, pk: int):
    instance = model.objects.select_for_update().filter(pk=pk).first()
    if instance is None:
        raise NotFound(f"No {model._meta.verbose_name} has this id.")
    return instance


def _check_currency(field: str, value: str) -> None:
    if value not in CURRENCIES:
        raise InvalidInput({field: "Give an ISO 4217 currency code, such as EUR."})


def amount_too_large(field: str, what: str) -> ApiError:
    """400 AMOUNT_TOO_LARGE naming `field` (also as the one entry of `errors`, like a validation error)."""
    message = f"{what} is over {MAX_AMOUNT} minor units."
    return ApiError(
        message,
        code=AMOUNT_TOO_LARGE,
        status_code=400,
        extra={"field": field, "maximum": MAX_AMOUNT, "errors": [{"field": field, "code": AMOUNT_TOO_LARGE, "message": message}]},
    )


def _check_amount(field: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidInput({field: "Give a whole, non-negative number of minor units."})
    if value is not None and value > MAX_AMOUNT:
        raise amount_too_large(field, field)


def check_attributes(value) -> None:
    if not isinstance(value, dict):
        raise InvalidInput({"attributes": "Give a JSON object."})
    if len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) > ATTRIBUTES_MAX_BYTES:
        raise InvalidInput({"attributes": f"At most {ATTRIBUTES_MAX_BYTES} bytes of JSON."})


def _apply(instance, changes: dict) -> list[str]:
    fields = []
    for name, value in changes.items():
        if getattr(instance, name) != value:
            setattr(instance, name, value)
            fields.append(name)
    return fields


def _summary_changed(merchant_id: int, *, using: str = DB) -> None:
    """The merchant's footer summary changes when this transaction commits."""
    transaction.on_commit(lambda: selectors.summary_changed(merchant_id), using=using)


def _catalog_changed(merchant_id: int) -> None:
    """A product or variant changed: the summary, and the search index until the worker syncs it."""
    _summary_changed(merchant_id)
    transaction.on_commit(selectors.search_changed, using=DB)


def _save(instance, fields: list[str], *, conflict: Conflict) -> None:
    if not fields:
        return
    try:
        with transaction.atomic(using=DB):
            instance.save(using=DB, update_fields=[*fields, "updated_at"])
    except IntegrityError:
        raise conflict from None


# --- Merchants ------------------------------------------------------------------------------------


def _slug_taken() -> Conflict:
    return Conflict("Another merchant has this slug.", code="MERCHANT_SLUG_TAKEN")


def _check_merchant(changes: dict) -> None:
    if "default_currency" in changes:
        _check_currency("defaultCurrency", changes["default_currency"])
    if "country" in changes and changes["country"] not in COUNTRIES:
        raise InvalidInput({"country": "Give an ISO 3166-1 alpha-2 country code, such as FR."})


def merchant_create(
    *,
    name: str,
    slug: str,
    default_currency: str,
    country: str,
    legal_name: str = "",
    timezone: str = "UTC",
    status: str = Merchant.Status.ACTIVE,
    created_by: int | None = None,
) -> Merchant:
    """Create a merchant and make its creator a member of it (a `join_domain` policy, spec 5), so
    the creator reaches the merchant and, with its roles, the merchant's records in every service.
    The membership commits first (policies live on `default`): if the merchant's own commit then
    failed, a membership of a merchant that does not exist grants nothing."""
    _check_merchant({"default_currency": default_currency, "country": country})
    merchant = Merchant(
        name=name,
        slug=slug,
        legal_name=legal_name,
        default_currency=default_currency,
        country=country,
        timezone=timezone,
        status=status,
        created_by=created_by,
    )
    with transaction.atomic(using=DB):
        try:
            with transaction.atomic(using=DB):
                merchant.save(using=DB, force_insert=True)
        except IntegrityError:
            raise _slug_taken() from None
        if created_by is not None:
            authorization.policy_join_domain(user_id=created_by, domain=merchant.id, source=authorization.MERCHANT_CREATE_SOURCE)
    return merchant


def merchant_update(*, merchant_id: int, **changes) -> Merchant:
    """Change a merchant's name, slug, legal name, default currency, country, timezone or status."""
    allowed = {"name", "slug", "legal_name", "default_currency", "country", "timezone", "status"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    _check_merchant(changes)
    with transaction.atomic(using=DB):
        merchant = _locked(Merchant, merchant_id)
        _save(merchant, _apply(merchant, changes), conflict=_slug_taken())
    return merchant


def merchant_delete(*, merchant_id: int) -> None:
    """Soft-delete a merchant that has no live products (delete those first): a merchant's records
    in other services hang from it, so it is never removed with its catalog in one stroke."""
    with transaction.atomic(using=DB):
        merchant = _locked(Merchant, merchant_id)
        if Product.objects.filter(merchant_id=merchant.id).exists():
            raise Conflict("Delete the merchant's products first.", code="MERCHANT_NOT_EMPTY")
        merchant.delete(using=DB)


def merchant_restore(*, merchant_id: int) -> Merchant:
    """Bring a soft-deleted merchant back (an operator action); its slug must be free again."""
    with transaction.atomic(using=DB):
        merchant = Merchant.all_objects.select_for_update().filter(pk=merchant_id).first()
        if merchant is None:
            raise NotFound("No merchant has this id.")
        if merchant.deleted_at is not None:
            merchant.deleted_at = None
            _save(merchant, ["deleted_at"], conflict=_slug_taken())
    return merchant


# --- Products -------------------------------------------------------------------------------------


def tax_group_check(merchant_id: int, tax_group_id: int | None) -> None:
    """A tax group a user names on a product (create or update) is the merchant's own: taxation,
    which owns it, answers (400 naming `taxGroupId` otherwise, 503 when it cannot answer). Called
    by the views before the write; internal callers (consumers, seeds) pass ids they already hold."""
    if tax_group_id is not None:
        references.check_owned(
            field="taxGroupId",
            url=f"{django_settings.COMMERCE_TAXATION_URL}/tax-groups/{tax_group_id}",
            merchant_id=merchant_id,
            what="tax group",
        )


def product_create(
    *,
    merchant_id: int,
    name: str,
    description: str = "",
    status: str = Product.Status.DRAFT,
    tax_group_id: int | None = None,
    created_by: int | None = None,
) -> Product:
    with transaction.atomic(using=DB):
        if not Merchant.objects.filter(pk=merchant_id).exists():
            raise NotFound("No merchant has this id.")
        product = Product(
            merchant_id=merchant_id, name=name, description=description, status=status, tax_group_id=tax_group_id, created_by=created_by
        )
        product.save(using=DB, force_insert=True)
        _catalog_changed(merchant_id)
    return product


def product_update(*, product_id: int, **changes) -> Product:
    """Change a product's name, description, status or tax group (never its merchant)."""
    allowed = {"name", "description", "status", "tax_group_id"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    with transaction.atomic(using=DB):
        product = _locked(Product, product_id)
        fields = _apply(product, changes)
        if fields:
            product.save(using=DB, update_fields=[*fields, "updated_at"])
            _catalog_changed(product.merchant_id)
    return product


def product_delete(*, product_id: int) -> None:
    """Soft-delete a product with its variants and media rows, in one transaction (the media
    objects themselves are removed later by the orphan sweep)."""
    with transaction.atomic(using=DB):
        product = _locked(Product, product_id)
        # Row by row, so each variant's delete reaches the PRODUCT_VARIANT stream as its own change.
        for variant in ProductVariant.objects.select_for_update().filter(primary_product_id=product.id).order_by("pk"):
            variant.delete(using=DB)
        product.media.all().delete()
        product.delete(using=DB)
        _catalog_changed(product.merchant_id)


def product_restore(*, product_id: int) -> Product:
    """Bring a soft-deleted product back (an operator action; its variants stay deleted)."""
    with transaction.atomic(using=DB):
        product = Product.all_objects.select_for_update().filter(pk=product_id).first()
        if product is None or not Merchant.objects.filter(pk=product.merchant_id).exists():
            raise NotFound("No product has this id.")
        if product.deleted_at is not None:
            product.deleted_at = None
            product.save(using=DB, update_fields=["deleted_at", "updated_at"])
            _catalog_changed(product.merchant_id)
    return product


# --- Variants -------------------------------------------------------------------------------------


def _sku_taken() -> Conflict:
    return Conflict("Another live variant of this merchant has this SKU.", code="SKU_TAKEN")


def _check_variant(changes: dict) -> None:
    if "currency" in changes:
        _check_currency("currency", changes["currency"])
    if "price_amount" in changes:
        if changes["price_amount"] is None:
            raise InvalidInput({"priceAmount": "A variant has a price."})
        _check_amount("priceAmount", changes["price_amount"])
    if "unit_cost_amount" in changes:
        _check_amount("unitCostAmount", changes["unit_cost_amount"])
    if "attributes" in changes:
        check_attributes(changes["attributes"])


def variant_create(
    *,
    product_id: int,
    sku: str,
    price_amount: int,
    currency: str,
    name: str = "",
    unit_cost_amount: int | None = None,
    attributes: dict | None = None,
    status: str = ProductVariant.Status.ACTIVE,
    created_by: int | None = None,
) -> ProductVariant:
    """A variant of `product_id`, in the product's merchant; its SKU is unique among the merchant's
    live variants (409 SKU_TAKEN)."""
    attributes = {} if attributes is None else attributes
    _check_variant({"currency": currency, "price_amount": price_amount, "unit_cost_amount": unit_cost_amount, "attributes": attributes})
    with transaction.atomic(using=DB):
        product = Product.objects.select_for_update().filter(pk=product_id).first()
        if product is None:
            raise NotFound("No product has this id.")
        variant = ProductVariant(
            merchant_id=product.merchant_id,
            primary_product_id=product.id,
            sku=sku,
            name=name,
            price_amount=price_amount,
            currency=currency,
            unit_cost_amount=unit_cost_amount,
            attributes=attributes,
            status=status,
            created_by=created_by,
        )
        try:
            with transaction.atomic(using=DB):
                variant.save(using=DB, force_insert=True)
        except IntegrityError:
            raise _sku_taken() from None
        _catalog_changed(product.merchant_id)
    return variant


def variant_update(*, variant_id: int, **changes) -> ProductVariant:
    """Change a variant's SKU, name, price, currency, unit cost, attributes or status (never its
    product or merchant)."""
    allowed = {"sku", "name", "price_amount", "currency", "unit_cost_amount", "attributes", "status"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    _check_variant(changes)
    with transaction.atomic(using=DB):
        variant = _locked(ProductVariant, variant_id)
        _save(variant, _apply(variant, changes), conflict=_sku_taken())
        _catalog_changed(variant.merchant_id)
    return variant


def variant_delete(*, variant_id: int) -> None:
    with transaction.atomic(using=DB):
        variant = _locked(ProductVariant, variant_id)
        variant.delete(using=DB)
        _catalog_changed(variant.merchant_id)


# --- Provider integrations ------------------------------------------------------------------------
# Configuration rows of group INTEGRATION whose principal is the merchant, in the shared `public`
# schema (written through `default`); the credential is sealed by merchant_platform.integrations.

POLICY_DB = "default"
SETTINGS_MAX_BYTES = 4096


def _integration_exists() -> Conflict:
    return Conflict("The merchant already has an integration with this code in this environment.", code="INTEGRATION_EXISTS")


def _check_settings(value) -> None:
    if not isinstance(value, dict):
        raise InvalidInput({"settings": "Give a JSON object."})
    if len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) > SETTINGS_MAX_BYTES:
        raise InvalidInput({"settings": f"At most {SETTINGS_MAX_BYTES} bytes of JSON."})
    if "endpoint" in value:
        # The provider's base URL payment calls: a merchant's URL, under the outbound guard.
        endpoint = value["endpoint"]
        try:
            if not isinstance(endpoint, str):
                raise outbound.RefusedUrl("Give an http(s) URL.")
            outbound.check_url(endpoint, allow_private=django_settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS)
        except outbound.RefusedUrl as exc:
            raise InvalidInput({"settings.endpoint": str(exc)}) from None


def _seal(configuration: Configuration, credential: str) -> None:
    configuration.credential, configuration.credential_mask = seal_credential(configuration_id=configuration.id, credential=credential)


def integration_create(
    *,
    merchant_id: int,
    code: str,
    credential: str,
    environment: str = Configuration.Environment.SANDBOX,
    status: str = Configuration.Status.ACTIVE,
    name: str = "",
    settings: dict | None = None,
    created_by: int | None = None,
) -> Configuration:
    settings = {} if settings is None else settings
    _check_settings(settings)
    if not Merchant.objects.filter(pk=merchant_id).exists():
        raise NotFound("No merchant has this id.")
    configuration = Configuration(
        group=Configuration.Group.INTEGRATION,
        principal_type=Configuration.PrincipalType.MERCHANT,
        principal_id=merchant_id,
        code=code,
        name=name,
        environment=environment,
        status=status,
        settings=settings,
        created_by=created_by,
    )
    _seal(configuration, credential)
    try:
        with transaction.atomic(using=POLICY_DB):
            configuration.save(using=POLICY_DB, force_insert=True)
            _summary_changed(merchant_id, using=POLICY_DB)
    except IntegrityError:
        raise _integration_exists() from None
    return configuration


def integration_update(*, integration_id: int, **changes) -> Configuration:
    """Change an integration's name, status, environment, settings, or replace its credential (which
    is write-only: it is sealed again, never read back)."""
    allowed = {"name", "status", "environment", "settings", "credential"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    if "settings" in changes:
        _check_settings(changes["settings"])
    credential = changes.pop("credential", None)
    with transaction.atomic(using=POLICY_DB):
        configuration = selectors.integrations().select_for_update().filter(pk=integration_id).first()
        if configuration is None:
            raise NotFound("No integration has this id.")
        fields = _apply(configuration, changes)
        if credential is not None:
            _seal(configuration, credential)
            fields += ["credential", "credential_mask"]
        if fields:
            try:
                with transaction.atomic(using=POLICY_DB):
                    configuration.save(using=POLICY_DB, update_fields=[*fields, "updated_at"])
            except IntegrityError:
                raise _integration_exists() from None
            _summary_changed(configuration.principal_id, using=POLICY_DB)
    return configuration


def integration_delete(*, integration_id: int) -> None:
    with transaction.atomic(using=POLICY_DB):
        configuration = selectors.integrations().select_for_update().filter(pk=integration_id).first()
        if configuration is None:
            raise NotFound("No integration has this id.")
        configuration.delete(using=POLICY_DB)
        _summary_changed(configuration.principal_id, using=POLICY_DB)


# --- Media ----------------------------------------------------------------------------------------


def media_upload(*, product_id: int, data: bytes, filename: str = "", created_by: int | None = None) -> ProductMedia:
    """Store an image of a product: its type is sniffed from its bytes (JPEG, PNG, GIF or WebP, 415
    otherwise), its size bounded (413). The object is written before the row commits, so a failed
    upload leaves no row; a commit that fails after the upload leaves an object without a row."""
    limit = django_settings.COMMERCE_MEDIA_MAX_BYTES
    if not data:
        raise InvalidInput({"file": "The file is empty."})
    if len(data) > limit:
        raise ApiError(f"An image is at most {limit} bytes.", code="MEDIA_TOO_LARGE", status_code=413)
    content_type = storage.sniff_image_type(data[:16])
    if content_type is None:
        raise ApiError("Only JPEG, PNG, GIF and WebP images are accepted.", code="MEDIA_TYPE_NOT_ALLOWED", status_code=415)
    with transaction.atomic(using=DB):
        product = Product.objects.select_for_update().filter(pk=product_id).first()
        if product is None:
            raise NotFound("No product has this id.")
        media = ProductMedia(
            merchant_id=product.merchant_id,
            product_id=product.id,
            content_type=content_type,
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            filename=filename[:255],
            created_by=created_by,
        )
        media.object_key = f"merchants/{product.merchant_id}/products/{product.id}/{media.id}"
        storage.put_object(media.object_key, data, content_type)
        media.save(using=DB, force_insert=True)
        _summary_changed(product.merchant_id)
    return media


def media_delete(*, media_id: int) -> None:
    """Soft-delete a media row; the object goes with the next sweep (media_sweep)."""
    with transaction.atomic(using=DB):
        media = _locked(ProductMedia, media_id)
        media.delete(using=DB)
        _summary_changed(media.merchant_id)


def media_sweep(*, grace_seconds: int, limit: int = 500) -> int:
    """Remove the objects of media deleted more than `grace_seconds` ago (the Celery beat task);
    idempotent: each row records when its object went. Returns how many objects were removed."""
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    doomed = ProductMedia.all_objects.filter(deleted_at__lt=cutoff, object_removed_at__isnull=True).order_by("pk")[:limit]
    removed = 0
    for media_id, key in doomed.values_list("id", "object_key"):
        storage.delete_object(key)  # deleting a missing object succeeds: a rerun is harmless
        ProductMedia.all_objects.filter(pk=media_id).update(object_removed_at=timezone.now())
        removed += 1
    return removed


# --- Search index ---------------------------------------------------------------------------------
# Written only by the sync worker (tasks.sync_products, fed by the product change stream) and by
# `manage.py reindex_products`, a batch of products at a time. A sync locks its products (in id
# order, so two batches never deadlock) and reads their rows only then: a later sync of a product
# waits for the earlier one and reads everything committed before it, so the latest version is
# written last, a replay changes nothing and any order converges.

INDEXED_STATUSES = (Product.Status.PUBLISHED, Product.Status.ARCHIVED)
REINDEX_BATCH = 1000
_DOCUMENT_FIELDS = (
    "merchant_id",
    "created_by",
    "name",
    "description",
    "skus",
    "status",
    "min_price_amount",
    "max_price_amount",
    "currency",
    "source_updated_at",
    "search_vector",
    "indexed_at",
)


def _indexed_products():
    """The products that belong in the index: live, PUBLISHED or ARCHIVED, of a live merchant."""
    return Product.objects.filter(status__in=INDEXED_STATUSES, merchant__deleted_at__isnull=True)


def _search_document(product: dict, variants: list[tuple]) -> ProductSearchDocument:
    active = [v for v in variants if v[3] == ProductVariant.Status.ACTIVE]
    skus = " ".join(v[0] for v in variants)
    # Computed by PostgreSQL in the INSERT, from the values written. SKUs are indexed as their words
    # (selectors.search_words), as queries are split.
    vector = (
        SearchVector(Value(product["name"]), weight="A", config="simple")
        + SearchVector(Value(" ".join(selectors.search_words(skus))), weight="A", config="simple")
        + SearchVector(Value(product["description"]), weight="B", config="simple")
    )
    return ProductSearchDocument(
        product_id=product["id"],
        merchant_id=product["merchant_id"],
        created_by=product["created_by"],
        name=product["name"],
        description=product["description"],
        skus=skus,
        status=product["status"],
        min_price_amount=active[0][1] if active else None,
        max_price_amount=active[-1][1] if active else None,
        currency=active[0][2] if active else "",
        source_updated_at=product["updated_at"],
        search_vector=vector,
    )


def search_sync_products(*, product_ids) -> int:
    """Make the search documents of `product_ids` match their rows, in one transaction: the indexed
    ones written with one INSERT ... ON CONFLICT, the others (deleted, unpublished, gone) removed.
    Returns how many of them are in the index afterwards."""
    ids = sorted({int(product_id) for product_id in product_ids})
    if not ids:
        return 0
    with transaction.atomic(using=DB):
        # FOR UPDATE returns each product's latest committed row once its lock is granted; the
        # merchants and variants are read by later statements, which see what committed before them
        # (READ COMMITTED), so after the locks.
        rows = (
            Product.all_objects.select_for_update()
            .filter(pk__in=ids)
            .order_by("pk")
            .values("id", "merchant_id", "created_by", "name", "description", "status", "updated_at", "deleted_at")
        )
        products = [row for row in rows if row["deleted_at"] is None and row["status"] in INDEXED_STATUSES]
        live_merchants = set(Merchant.objects.filter(pk__in={row["merchant_id"] for row in products}).values_list("pk", flat=True))
        products = [row for row in products if row["merchant_id"] in live_merchants]
        variants: dict[int, list[tuple]] = {product["id"]: [] for product in products}
        variant_rows = (
            ProductVariant.objects.filter(primary_product_id__in=list(variants))
            .order_by("primary_product_id", "price_amount", "pk")
            .values_list("primary_product_id", "sku", "price_amount", "currency", "status")
        )
        for product_id, *variant in variant_rows:
            variants[product_id].append(tuple(variant))
        if products:
            ProductSearchDocument.objects.bulk_create(
                [_search_document(product, variants[product["id"]]) for product in products],
                update_conflicts=True,
                unique_fields=["product_id"],
                update_fields=_DOCUMENT_FIELDS,
            )
        ProductSearchDocument.objects.filter(pk__in=set(ids) - set(variants)).delete()
    return len(products)


def search_reindex(*, batch_size: int = REINDEX_BATCH) -> int:
    """Rebuild every document (`manage.py reindex_products`), batch by batch while searches keep
    answering, then remove the documents of products that are no longer indexed; returns the
    documents written."""
    indexed, last = 0, 0
    ids = Product.objects.filter(status__in=INDEXED_STATUSES).order_by("pk").values_list("pk", flat=True)
    while batch := list(ids.filter(pk__gt=last)[:batch_size]):
        indexed += search_sync_products(product_ids=batch)
        last = batch[-1]
    ProductSearchDocument.objects.exclude(product_id__in=_indexed_products().values("pk")).delete()
    selectors.search_indexed()
    return indexed
