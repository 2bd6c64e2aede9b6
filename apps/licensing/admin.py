"""Operator views of licensing. Lifecycle changes go through the API (they audit and re-publish);
the audit trail is read-only here as it is in the database."""

from django.contrib import admin

from apps.licensing.models import Activation, License, LicenseEvent, Policy


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "duration_seconds", "activation_limit", "is_trial"]
    search_fields = ["code", "name"]


@admin.register(License)
class LicenseAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "owner_id", "policy", "status", "expires_at", "last_validated_at"]
    list_filter = ["status", "policy"]
    search_fields = ["=id", "=owner_id", "name"]
    readonly_fields = ["key", "status", "last_validated_at"]


@admin.register(Activation)
class ActivationAdmin(admin.ModelAdmin):
    list_display = ["id", "license", "fingerprint", "name", "created_at"]
    search_fields = ["=license__id", "fingerprint"]


@admin.register(LicenseEvent)
class LicenseEventAdmin(admin.ModelAdmin):
    list_display = ["id", "license", "type", "actor", "created_at"]
    list_filter = ["type"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
