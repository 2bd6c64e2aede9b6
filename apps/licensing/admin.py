"""Django admin for operators of the all-in-one topology. Records are read-only here: every change is
an admin action or a delete that calls the service functions, so the admin audits and re-publishes
certificates exactly as the API does. The audit trail is read-only, as it is in the database."""

from __future__ import annotations

from django.contrib import admin

from apps.licensing import services
from apps.licensing.models import Activation, License, LicenseEvent, Policy
from merchant_platform.admin import MerchantAdmin, MerchantFilter, ServiceBackedAdmin


@admin.register(Policy)
class PolicyAdmin(ServiceBackedAdmin):
    list_display = ("code", "name", "duration_seconds", "activation_limit", "is_trial")
    search_fields = ("code", "name")
    fields = ("id", "code", "name", "duration_seconds", "activation_limit", "entitlements", "is_trial", "created_by", "created_at")
    readonly_fields = fields

    def has_delete_permission(self, request, obj=None):
        return False  # licenses keep pointing at their policy; nothing may remove one


def lifecycle_action(name: str, service, description: str):
    """An admin action that runs a lifecycle service per selected license, audited as the operator;
    licenses whose state forbids the action are reported, not changed."""

    def act(modeladmin, request, queryset):
        modeladmin.call_each(request, queryset, service, "license_id", actor=f"user:{request.user.pk}")

    act.__name__ = name
    return admin.action(description=description, permissions=("service",))(act)


@admin.register(License)
class LicenseAdmin(MerchantAdmin):
    list_display = ("id", "name", "owner_id", "merchant", "policy", "status", "expires_at", "last_validated_at")
    list_filter = ("status", "policy", MerchantFilter)
    search_fields = ("=id", "=owner_id", "=merchant_id", "name")
    fields = (
        "id",
        "key",
        "name",
        "owner_id",
        "merchant",
        "policy",
        "status",
        "expires_at",
        "activation_config",
        "entitlements",
        "metadata",
        "last_validated_at",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = (
        lifecycle_action("activate", services.license_activate, "Activate selected licenses"),
        lifecycle_action("suspend", services.license_suspend, "Suspend selected licenses"),
        lifecycle_action("reinstate", services.license_reinstate, "Reinstate selected licenses"),
        lifecycle_action("renew", services.license_renew, "Renew selected licenses by one policy duration"),
        lifecycle_action("revoke", services.license_revoke, "Revoke selected licenses (final)"),
    )
    delete_service = (services.license_delete, "license_id")


@admin.register(Activation)
class ActivationAdmin(ServiceBackedAdmin):
    list_display = ("id", "license", "fingerprint", "name", "created_at")
    search_fields = ("=license__id", "fingerprint")
    fields = ("id", "license", "fingerprint", "name", "metadata", "created_by", "created_at")
    readonly_fields = fields
    delete_service = (services.activation_delete, "activation_id")


@admin.register(LicenseEvent)
class LicenseEventAdmin(ServiceBackedAdmin):
    list_display = ("id", "license", "type", "actor", "created_at")
    list_filter = ("type",)

    def has_delete_permission(self, request, obj=None):
        return False
