"""Base records shared by every service: snowflake ids, timestamps and soft delete (spec 1.2.6)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from merchant_platform import snowflake


class SnowflakeIdField(models.BigIntegerField):
    """A 64-bit snowflake id. JSON carries it as a string (it exceeds JavaScript's 2^53)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("default", snowflake.next_id)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        if kwargs.get("default") is snowflake.next_id:
            del kwargs["default"]
        kwargs.pop("editable", None)
        return name, path, args, kwargs


class SoftDeleteQuerySet(models.QuerySet):
    def delete(self):
        """Soft-delete every row of the queryset; returns the number of rows marked."""
        return self.update(deleted_at=timezone.now())

    def hard_delete(self):
        return super().delete()

    def alive(self):
        return self.filter(deleted_at__isnull=True)

    def dead(self):
        return self.filter(deleted_at__isnull=False)


class SoftDeleteManager(models.Manager.from_queryset(SoftDeleteQuerySet)):
    """The default manager: deleted rows are invisible."""

    def get_queryset(self):
        return super().get_queryset().filter(deleted_at__isnull=True)


class AllRowsManager(models.Manager.from_queryset(SoftDeleteQuerySet)):
    """Every row, deleted or not (admin recovery, audits)."""


class BaseModel(models.Model):
    """Every record: a snowflake id, created/updated timestamps and a soft-delete mark."""

    id = SnowflakeIdField(primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = SoftDeleteManager()
    all_objects = AllRowsManager()

    class Meta:
        abstract = True
        base_manager_name = "all_objects"

    def delete(self, using=None, keep_parents=False):
        """Soft delete: mark the row; nothing in the API removes it."""
        self.deleted_at = timezone.now()
        self.save(using=using, update_fields=["deleted_at", "updated_at"])
        return 1, {self._meta.label: 1}

    def hard_delete(self, using=None, keep_parents=False):
        """Remove the row for good: an explicit operator action, never used by an API."""
        return super().delete(using=using, keep_parents=keep_parents)

    def restore(self) -> None:
        self.deleted_at = None
        self.save(update_fields=["deleted_at", "updated_at"])

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None


class OwnedModel(BaseModel):
    """A record with an owner: the OWNER role reaches the records it created (spec section 5)."""

    created_by = models.BigIntegerField(null=True, blank=True, db_index=True)

    class Meta(BaseModel.Meta):
        abstract = True


class PolicyDefinition(BaseModel):
    """One row of the policy store (spec 2.1 and 5), in the shared `public` schema so that every
    service's policy layer reads it through the `default` alias. Read by merchant_platform.authorization.

    - kind ROLE: the subject holds `role` in `domain` ("*" = everywhere).
    - kind PERMISSION: the subject (a User, or every holder of a Role) may (effect allow) or may not
      (effect deny) do `action` on `resource` in `domain`.
    - kind JOIN_DOMAIN: the user belongs to tenant `domain` (a merchant id): the tenant isolation rule.
    """

    class Kind(models.TextChoices):
        ROLE = "ROLE"
        PERMISSION = "PERMISSION"
        JOIN_DOMAIN = "JOIN_DOMAIN"

    class SubjectType(models.TextChoices):
        USER = "User"
        ROLE = "Role"

    class Effect(models.TextChoices):
        ALLOW = "allow"
        DENY = "deny"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    subject_type = models.CharField(max_length=16, choices=SubjectType.choices, default=SubjectType.USER)
    subject_id = models.CharField(max_length=64, help_text="A user id, or a role name when subject_type is Role.")
    role = models.CharField(max_length=32, blank=True, default="")
    resource = models.CharField(max_length=128, blank=True, default="", help_text='e.g. "finance.Account", "finance.*" or "*"')
    action = models.CharField(max_length=64, blank=True, default="", help_text='e.g. "read", "create", "void" or "*"')
    domain = models.CharField(max_length=64, default="*", help_text='A merchant id, or "*" for every domain.')
    effect = models.CharField(max_length=8, choices=Effect.choices, default=Effect.ALLOW)
    source = models.CharField(max_length=32, blank=True, default="", help_text="The service whose seeds own the row, or empty.")

    class Meta(BaseModel.Meta):
        db_table = "policy_definition"
        indexes = [models.Index(fields=["subject_type", "subject_id"], name="policy_subject_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "subject_type", "subject_id", "role", "resource", "action", "domain", "effect"],
                condition=models.Q(deleted_at__isnull=True),
                name="policy_definition_unique_alive",
            )
        ]

    def __str__(self) -> str:
        target = self.role or (f"{self.effect} {self.resource}.{self.action}" if self.kind == self.Kind.PERMISSION else "")
        return f"{self.subject_type}:{self.subject_id} {self.kind} {target} @ {self.domain}".replace("  ", " ")
