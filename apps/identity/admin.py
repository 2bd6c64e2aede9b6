"""Django admin (all-in-one operators): accounts, without their password hashes. Records are
read-only here: deactivation, reactivation and deletion are actions that call the service functions,
so the admin follows the API's rules (every token of a deactivated account is refused at once).

The admin's own sign-in runs under the sign-in guard of the API (apps.identity.guard): failures are
counted per operator name and per client IP, and past the limit the login is refused, even with the
right password, until the window ends."""

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError

from apps.identity import guard, services
from apps.identity.models import User
from merchant_platform.admin import ServiceBackedAdmin
from merchant_platform.logging import get_logger

log = get_logger(__name__)


class GuardedAdminAuthenticationForm(AdminAuthenticationForm):
    """The admin login form under identity's sign-in guard (keys of their own kind, `operator`, so
    an operator's lock and an API account's never touch)."""

    def clean(self):
        username = (self.cleaned_data.get("username") or "").strip().casefold()
        key, ip = guard.identifier_digest("operator", username), guard.client_ip(self.request)
        try:
            guard.check(key, ip)
        except guard.SignInLocked as locked:
            log.warning("identity.admin_sign_in_locked", retryAfter=locked.wait)
            raise ValidationError(
                "Too many failed sign-in attempts; try again in %(seconds)s seconds.", code="locked", params={"seconds": locked.wait}
            ) from None
        try:
            cleaned = super().clean()
        except ValidationError:
            guard.record_failure(key, ip)
            raise
        guard.record_success(key, ip)
        return cleaned


admin.site.login_form = GuardedAdminAuthenticationForm


@admin.register(User)
class UserAdmin(ServiceBackedAdmin):
    list_display = ("id", "email", "phone", "username", "is_active", "created_at", "last_sign_in_at")
    search_fields = ("email", "phone", "username")
    list_filter = ("is_active",)
    fields = (
        "id",
        "email",
        "phone",
        "username",
        "is_active",
        "email_verified_at",
        "phone_verified_at",
        "password_changed_at",
        "last_sign_in_at",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("deactivate", "reactivate")
    delete_service = (services.user_delete, "user_id")

    @admin.action(description="Deactivate selected accounts (their tokens are refused at once)", permissions=("service",))
    def deactivate(self, request, queryset):
        self.call_each(request, queryset.filter(is_active=True), services.user_deactivate, "user_id")

    @admin.action(description="Reactivate selected accounts", permissions=("service",))
    def reactivate(self, request, queryset):
        self.call_each(request, queryset.filter(is_active=False), services.user_reactivate, "user_id")
