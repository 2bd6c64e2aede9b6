"""Django admin bases every service shares: read-only admins whose changes call the services, money
shown in major units with its currency, and merchant ids shown with the merchant's name."""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

import requests
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.core.cache import cache

from merchant_platform import money
from merchant_platform.errors import ApiError
from merchant_platform.http import session
from merchant_platform.logging import get_logger
from merchant_platform.verification.service_accounts import basic_auth_header

log = get_logger(__name__)

# Merchant names are read from commerce (other services may not import it) and kept this long in
# Redis: a renamed merchant shows its new name within a minute.
MERCHANT_NAME_SECONDS = 60
MERCHANT_NAME_KEY = "admin:merchant-name:{}"
# One list request per page: commerce's largest page (merchant_platform.pagination), newest first.
MERCHANT_PAGE_SIZE = 200
# An admin page waits this little for commerce before it shows bare ids (connect, read); after a
# failure, pages show bare ids without asking again for a few seconds.
COMMERCE_TIMEOUT = (1, 2)
COMMERCE_DOWN_KEY = "admin:merchant-names-unavailable"
COMMERCE_DOWN_SECONDS = 15


class ServiceBackedAdmin(admin.ModelAdmin):
    """No add or edit form: changes are admin actions that call the service functions, so the admin
    follows the same rules (events, audit, caches) as the API; deletes are soft."""

    # (service function, its id keyword): a delete calls it per record, so it is the service's soft
    # delete with its rules; None keeps Django's delete.
    delete_service = None

    def call_service(self, request, function, **kwargs) -> bool:
        """Run a service function; a rule it refuses (ApiError) becomes an error message on the page."""
        try:
            function(**kwargs)
        except ApiError as exc:
            arguments = ", ".join(f"{name}={value}" for name, value in kwargs.items())
            self.message_user(request, f"Not changed: {arguments}: {exc.detail} ({exc.code})", level=messages.ERROR)
            return False
        return True

    def call_each(self, request, queryset, function, keyword: str, **kwargs) -> int:
        """call_service once per record of `queryset`, its id passed as `keyword`; how many calls the
        service accepted."""
        return sum(self.call_service(request, function, **{keyword: pk}, **kwargs) for pk in queryset.values_list("pk", flat=True))

    def delete_model(self, request, obj):
        if self.delete_service is None:
            return super().delete_model(request, obj)
        function, keyword = self.delete_service
        self.call_service(request, function, **{keyword: obj.pk})
        return None

    def delete_queryset(self, request, queryset):
        if self.delete_service is None:
            return super().delete_queryset(request, queryset)
        function, keyword = self.delete_service
        self.call_each(request, queryset, function, keyword)
        return None

    def has_service_permission(self, request):
        """Who may run the admin's actions (`permissions=("service",)`): whoever may change the model."""
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('change', self.opts)}")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_deleted_objects(self, objs, request):
        """A soft delete marks the selected records only: related rows (audit trails, seats) stay,
        so Django's cascade preview and its permission checks on related models do not apply."""
        objs = list(objs)
        return [str(obj) for obj in objs], {self.model._meta.verbose_name_plural: len(objs)}, set(), []


class ReadOnlyInline(admin.TabularInline):
    """An inline of a ServiceBackedAdmin: the rows are shown, never added, edited or deleted."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def service_action(name: str, description: str, function, keyword: str):
    """An admin action calling `function(<keyword>=id)` per selected record (ServiceBackedAdmin.call_each),
    run by whoever may change the model."""

    def act(modeladmin, request, queryset):
        modeladmin.call_each(request, queryset, function, keyword)

    act.__name__ = name
    return admin.action(description=description, permissions=("service",))(act)


def money_column(field: str, *, currency: str = "currency", description: str | None = None):
    """An admin column (list_display, fields) showing the minor-unit amount `field` in major units
    with its currency, e.g. "11.00 EUR"; `currency` is the attribute path of the ISO 4217 code
    ("transaction.currency" for a currency held by the parent)."""
    amount_of, currency_of = attrgetter(field), attrgetter(currency)

    def column(modeladmin, obj):
        amount = amount_of(obj)
        return None if amount is None else money.display(amount, currency_of(obj))

    return admin.display(description=description or field.replace("_", " "), ordering=field)(column)


def _fetch_merchant_names(account: str, merchant_ids: list[int]) -> dict[int, str] | None:
    """The names of `merchant_ids` as `account` (the asking service's own) sees them in commerce, a
    request per MERCHANT_PAGE_SIZE ids, or None when commerce does not answer: the admin then shows
    bare ids."""
    url = f"{settings.ADMIN_COMMERCE_URL}/merchants"
    names: dict[int, str] = {}
    try:
        with session(retries=0) as http:
            for start in range(0, len(merchant_ids), MERCHANT_PAGE_SIZE):
                chunk = merchant_ids[start : start + MERCHANT_PAGE_SIZE]
                response = http.get(
                    url,
                    params={"ids": ",".join(map(str, chunk)), "pageSize": MERCHANT_PAGE_SIZE},
                    headers={"Authorization": basic_auth_header(account)},
                    timeout=COMMERCE_TIMEOUT,
                )
                response.raise_for_status()
                names.update({int(merchant["id"]): str(merchant["name"]) for merchant in response.json()["results"]})
    except (requests.RequestException, ValueError, LookupError, TypeError) as exc:  # no answer, or not a merchant list
        log.warning("admin.merchant_names_unavailable", url=url, error=type(exc).__name__)
        cache.set(COMMERCE_DOWN_KEY, True, COMMERCE_DOWN_SECONDS)
        return None
    return names


def merchant_names(merchant_ids: Iterable[int], *, account: str) -> dict[int, str]:
    """The names of the merchants `merchant_ids` names, from Redis, the others asked of commerce by id
    (one request per page of ids); a merchant commerce did not name maps to "" (kept as long, so it
    costs no request per page)."""
    keys = {MERCHANT_NAME_KEY.format(merchant_id): merchant_id for merchant_id in set(merchant_ids) if merchant_id is not None}
    names = {keys[key]: name for key, name in cache.get_many(keys).items()}
    missing = sorted(merchant_id for merchant_id in keys.values() if merchant_id not in names)
    if missing and not cache.get(COMMERCE_DOWN_KEY):
        fetched = _fetch_merchant_names(account, missing)
        if fetched is not None:
            fetched.update({merchant_id: "" for merchant_id in missing if merchant_id not in fetched})
            cache.set_many({MERCHANT_NAME_KEY.format(merchant_id): name for merchant_id, name in fetched.items()}, MERCHANT_NAME_SECONDS)
            names.update(fetched)
    return names


def merchant_label(merchant_id: int, names: dict[int, str]) -> str:
    name = names.get(merchant_id)
    return f"{name} ({merchant_id})" if name else str(merchant_id)


class MerchantAdmin(ServiceBackedAdmin):
    """A ServiceBackedAdmin whose records carry a `merchant_id` (another service's merchant): the
    `merchant` column shows it with the merchant's name, read once per list page."""

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)  # evaluates the page once; the template reuses these rows
        names = merchant_names((row.merchant_id for row in rows), account=self.opts.app_label)
        for row in rows:
            row.merchant_label = merchant_label(row.merchant_id, names)
        return changelist

    @admin.display(description="merchant", ordering="merchant_id")
    def merchant(self, obj):
        if obj.merchant_id is None:
            return None
        if hasattr(obj, "merchant_label"):
            return obj.merchant_label
        return merchant_label(obj.merchant_id, merchant_names([obj.merchant_id], account=self.opts.app_label))


class MerchantFilter(admin.SimpleListFilter):
    """List filter by merchant: the merchants the list holds, labelled with their names."""

    title = "merchant"
    parameter_name = "merchant"

    def lookups(self, request, model_admin):
        merchants = model_admin.get_queryset(request).exclude(merchant_id=None).order_by().values_list("merchant_id", flat=True)
        merchant_ids = list(merchants.distinct())
        names = merchant_names(merchant_ids, account=model_admin.opts.app_label)
        return sorted(
            ((str(merchant_id), merchant_label(merchant_id, names)) for merchant_id in merchant_ids), key=lambda choice: choice[1]
        )

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(merchant_id=int(value)) if value.isascii() and value.isdigit() else queryset.none()
