"""Django admin for operators of the all-in-one topology: notifications are read-only here; a
delete is the service's soft delete."""

from django.contrib import admin

from apps.signal import services
from apps.signal.models import Notification
from merchant_platform.admin import ServiceBackedAdmin


@admin.register(Notification)
class NotificationAdmin(ServiceBackedAdmin):
    list_display = ("id", "recipient_id", "topic", "room", "title", "read_at", "created_at")
    list_filter = ("topic",)
    search_fields = ("=recipient_id", "topic", "room", "title")
    date_hierarchy = "created_at"
    fields = ("id", "recipient_id", "topic", "room", "title", "body", "data", "read_at", "message_id", "created_at", "updated_at")
    readonly_fields = fields

    def delete_model(self, request, obj):
        services.notification_delete(notification_id=obj.id, recipient_id=obj.recipient_id)

    def delete_queryset(self, request, queryset):
        for notification_id, recipient_id in queryset.values_list("id", "recipient_id"):
            services.notification_delete(notification_id=notification_id, recipient_id=recipient_id)
