"""Django admin for operators of the all-in-one topology. Records are read-only here: changes go
through the services (actions below), so the admin follows the same rules as the API. The
subscriber's token hash is not shown."""

from django.contrib import admin

from apps.outreach import services
from apps.outreach.models import Inquiry, Subscriber
from merchant_platform.admin import ServiceBackedAdmin


@admin.register(Inquiry)
class InquiryAdmin(ServiceBackedAdmin):
    list_display = ("id", "subject", "email", "merchant_id", "status", "created_at")
    list_filter = ("status",)
    search_fields = ("email", "subject", "name")
    date_hierarchy = "created_at"
    fields = ("id", "name", "email", "phone", "subject", "message", "merchant_id", "status", "created_at", "updated_at")
    readonly_fields = fields
    actions = ("mark_spam",)

    @admin.action(description="Mark selected inquiries as spam (CANCELLED)", permissions=("mark_spam",))
    def mark_spam(self, request, queryset):
        for inquiry in queryset.filter(status=Inquiry.Status.SENT):
            services.inquiry_update(inquiry=inquiry, status=Inquiry.Status.CANCELLED)

    def has_mark_spam_permission(self, request):
        return request.user.has_perm("outreach.change_inquiry")

    def delete_model(self, request, obj):
        services.inquiry_delete(inquiry=obj)

    def delete_queryset(self, request, queryset):
        for inquiry in queryset:
            services.inquiry_delete(inquiry=inquiry)


@admin.register(Subscriber)
class SubscriberAdmin(ServiceBackedAdmin):
    list_display = ("id", "email", "name", "status", "confirmed_at", "created_at")
    list_filter = ("status",)
    search_fields = ("email", "name")
    fields = ("id", "email", "name", "status", "confirmed_at", "unsubscribed_at", "created_at", "updated_at")
    readonly_fields = fields
    actions = ("unsubscribe",)

    @admin.action(description="Unsubscribe selected subscribers", permissions=("unsubscribe",))
    def unsubscribe(self, request, queryset):
        for subscriber in queryset.exclude(status=Subscriber.Status.UNSUBSCRIBED):
            services.subscriber_update(subscriber=subscriber, status=Subscriber.Status.UNSUBSCRIBED)

    def has_unsubscribe_permission(self, request):
        return request.user.has_perm("outreach.change_subscriber")

    def delete_model(self, request, obj):
        services.subscriber_delete(subscriber=obj)

    def delete_queryset(self, request, queryset):
        for subscriber in queryset:
            services.subscriber_delete(subscriber=subscriber)
