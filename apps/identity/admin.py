"""Django admin (all-in-one operators): accounts, without their password hashes."""

from django.contrib import admin

from apps.identity.models import User


@admin.register(User)
class UserAdmin(admin.ModelAdmin):
    list_display = ("id", "email", "phone", "username", "is_active", "created_at", "last_sign_in_at")
    search_fields = ("email", "phone", "username")
    list_filter = ("is_active",)
    exclude = ("password_hash",)
    readonly_fields = ("email_verified_at", "phone_verified_at", "password_changed_at", "last_sign_in_at")
