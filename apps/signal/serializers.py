"""Shapes of the signal service: the notifications API (camelCase JSON, ids as strings), the body
of a `signal.activity-notification` message, and the client endpoints."""

from __future__ import annotations

import json

from django.core.validators import RegexValidator
from rest_framework import serializers

from apps.signal.models import Notification
from merchant_platform.serializers import BaseModelSerializer, BaseSerializer, SnowflakeField, StrictCharField, multi_line, single_line

# Room names: what the rooms of docs/services/signal.md are made of (no spaces, no control characters).
ROOM_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
room_name = RegexValidator(ROOM_PATTERN, message="A room name is 1-200 of A-Z a-z 0-9 . _ : -")
DATA_MAX_BYTES = 16 * 1024


class NotificationSerializer(BaseModelSerializer):
    """A notification of the caller."""

    recipientId = SnowflakeField(read_only=True)
    room = serializers.SerializerMethodField()
    readAt = serializers.DateTimeField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = Notification
        fields = ("id", "recipientId", "topic", "room", "title", "body", "data", "readAt", "createdAt", "updatedAt")
        read_only_fields = fields

    def get_room(self, notification) -> str | None:
        return notification.room or None


class UnreadCountSerializer(BaseSerializer):
    """How many of the caller's notifications are unread."""

    unread = serializers.IntegerField(read_only=True)


class MarkedSerializer(BaseSerializer):
    """How many notifications `read-all` marked read."""

    marked = serializers.IntegerField(read_only=True)


class JSONObjectField(serializers.JSONField):
    """A JSON object of bounded size (the notification's `data`)."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        value = super().to_internal_value(data)
        if len(json.dumps(value, separators=(",", ":")).encode()) > DATA_MAX_BYTES:
            raise serializers.ValidationError(f"At most {DATA_MAX_BYTES} bytes of JSON.")
        return value


class ActivityMessageSerializer(BaseSerializer):
    """The value of a `signal.activity-notification` message (docs/services/signal.md)."""

    recipientId = SnowflakeField()
    topic = StrictCharField(max_length=200, validators=[single_line])
    room = StrictCharField(max_length=200, required=False, default="", allow_blank=True, validators=[room_name])
    title = StrictCharField(max_length=200, required=False, default="", allow_blank=True, validators=[single_line])
    body = StrictCharField(max_length=5000, required=False, default="", allow_blank=True, validators=[multi_line])
    data = JSONObjectField(required=False, default=dict)


class ClientsStatusSerializer(BaseSerializer):
    """WebSocket readiness of this replica."""

    snake_case_sources = False

    ready = serializers.BooleanField(read_only=True)
    requireEncryption = serializers.BooleanField(read_only=True)
    replicas = serializers.IntegerField(read_only=True, help_text="Replicas holding sockets now.")
    connections = serializers.IntegerField(read_only=True)


class ClientSerializer(BaseSerializer):
    """One connected /stream client (never its keys)."""

    snake_case_sources = False

    sessionId = serializers.CharField(read_only=True)
    replica = serializers.CharField(read_only=True)
    subjectId = serializers.CharField(read_only=True)
    rooms = serializers.ListField(child=serializers.CharField(), read_only=True)
    connectedAt = serializers.DateTimeField(read_only=True)
