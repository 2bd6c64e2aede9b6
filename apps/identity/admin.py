"""Django admin (all-in-one operators): accounts, without their password hashes. Records are
read-only here: deactivation, reactivation and deletion are actions that call the service functions,
so the admin follows the API's rules (every token of a deactivated account is refused at once)."""

from django.contrib import admin

from apps.identity import services
from apps.identity.models import User
from merchant_platform.admin import ServiceBackedAdmin


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

    @admin.action(description="Deactivate selected accounts (their tokens are refused at once)", permissions=("change_state",))
    def deactivate(self, request, queryset):
        for user_id in queryset.filter(is_active=True).values_list("pk", flat=True):
            services.user_deactivate(user_id=user_id)

    @admin.action(description="Reactivate selected accounts", permissions=("change_state",))
    def reactivate(self, request, queryset):
        for user_id in queryset.filter(is_active=False).values_list("pk", flat=True):
            services.user_reactivate(user_id=user_id)

    def has_change_state_permission(self, request):
        return request.user.has_perm("identity.change_user")

    def delete_model(self, request, obj):
        services.user_delete(user_id=obj.pk)

    def delete_queryset(self, request, queryset):
        for user_id in queryset.values_list("pk", flat=True):
            services.user_delete(user_id=user_id)
