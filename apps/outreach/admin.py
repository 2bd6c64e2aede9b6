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

    @admin.action(description="Mark selected inquiries as spam (CANCELLED)", permissions=("mark_spam",))
    def mark_spam(self, request, queryset):
        for inquiry_id in queryset.filter(status=Inquiry.Status.SENT).values_list("id", flat=True):
            services.inquiry_update(inquiry_id=inquiry_id, status=Inquiry.Status.CANCELLED)

    def has_mark_spam_permission(self, request):
        return request.user.has_perm("outreach.change_inquiry")

    def delete_model(self, request, obj):
        services.inquiry_delete(inquiry_id=obj.id)

    def delete_queryset(self, request, queryset):
        for inquiry_id in queryset.values_list("id", flat=True):
            services.inquiry_delete(inquiry_id=inquiry_id)


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
        for subscriber_id in queryset.exclude(status=Subscriber.Status.UNSUBSCRIBED).values_list("id", flat=True):
            services.subscriber_update(subscriber_id=subscriber_id, status=Subscriber.Status.UNSUBSCRIBED)

    def has_unsubscribe_permission(self, request):
        return request.user.has_perm("outreach.change_subscriber")

    def delete_model(self, request, obj):
        services.subscriber_delete(subscriber_id=obj.id)

    def delete_queryset(self, request, queryset):
        for subscriber_id in queryset.values_list("id", flat=True):
            services.subscriber_delete(subscriber_id=subscriber_id)
