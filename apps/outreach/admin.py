"""Django admin for operators of the all-in-one topology. Records are read-only here: changes go
through the services (actions below), so the admin follows the same rules as the API. The
subscriber's token hash is not shown."""

from django.contrib import admin

from apps.outreach import services
from apps.outreach.models import Inquiry, Subscriber
from merchant_platform.admin import MerchantAdmin, MerchantFilter, ServiceBackedAdmin


@admin.register(Inquiry)
class InquiryAdmin(MerchantAdmin):
    list_display = ("id", "subject", "email", "merchant", "status", "created_at")
    list_filter = ("status", MerchantFilter)
    search_fields = ("email", "subject", "name")
    date_hierarchy = "created_at"
    fields = ("id", "name", "email", "phone", "subject", "message", "merchant", "status", "created_at", "updated_at")
    readonly_fields = fields
    actions = ("mark_spam",)
    delete_service = (services.inquiry_delete, "inquiry_id")

    @admin.action(description="Mark selected inquiries as spam (CANCELLED)", permissions=("service",))
    def mark_spam(self, request, queryset):
        sent = queryset.filter(status=Inquiry.Status.SENT)
        self.call_each(request, sent, services.inquiry_update, "inquiry_id", status=Inquiry.Status.CANCELLED)


@admin.register(Subscriber)
class SubscriberAdmin(ServiceBackedAdmin):
    list_display = ("id", "email", "name", "status", "confirmed_at", "created_at")
    list_filter = ("status",)
    search_fields = ("email", "name")
    fields = ("id", "email", "name", "status", "confirmed_at", "unsubscribed_at", "created_at", "updated_at")
    readonly_fields = fields
    actions = ("unsubscribe",)
    delete_service = (services.subscriber_delete, "subscriber_id")

    @admin.action(description="Unsubscribe selected subscribers", permissions=("service",))
    def unsubscribe(self, request, queryset):
        subscribed = queryset.exclude(status=Subscriber.Status.UNSUBSCRIBED)
        self.call_each(request, subscribed, services.subscriber_update, "subscriber_id", status=Subscriber.Status.UNSUBSCRIBED)
