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
    service's policy layer reads it through the `default` alias. Read by merchant_platform.policy.

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


class TokenCutoff(BaseModel):
    """A user's "valid after" instant (merchant_platform.revocation): tokens issued before it are
    refused by every verifier. In the shared `public` schema, so every service reads it through the
    `default` alias when the copy in Redis is missing."""

    user_id = models.BigIntegerField(unique=True)
    valid_after = models.DateTimeField(help_text="Access tokens issued (iat) and refresh tokens created before it are refused.")

    class Meta(BaseModel.Meta):
        db_table = "token_cutoff"

    def __str__(self) -> str:
        return f"tokens of user {self.user_id} valid after {self.valid_after.isoformat()}"


class SnowflakeLease(models.Model):
    """A snowflake worker id held by a live process (merchant_platform.snowflake.PostgresWorkerLease):
    what keeps the processes that run without Redis (inventory, spec 1.3) unique. Not a BaseModel:
    its id would be a snowflake, which needs the lease first. Written in raw SQL only (one statement
    per acquire, renewal and release, against the database's clock)."""

    worker_id = models.PositiveSmallIntegerField(primary_key=True)
    holder = models.CharField(max_length=200, help_text="host:pid:nonce of the process holding the id.")
    expires_at = models.DateTimeField(help_text="The lease is free from then unless renewed.")

    class Meta:
        db_table = "snowflake_lease"

    def __str__(self) -> str:
        return f"worker id {self.worker_id} held by {self.holder} until {self.expires_at.isoformat()}"


class Configuration(BaseModel):
    """A shared configuration record (spec 2.1), in the `public` schema so every service reads it
    through the `default` alias. Group INTEGRATION holds provider integrations (a merchant's payment
    provider account: spec 2.1 PaymentIntegration): commerce writes them, payment reads them through
    `merchant_platform.integrations`.

    `credential` is AES-256-GCM ciphertext (merchant_platform.crypto, purpose CREDENTIAL_PURPOSE, bound
    to the row's id), never plaintext; `credential_mask` is its display form, computed when it is
    written, so showing a record never needs the key."""

    CREDENTIAL_PURPOSE = "configuration-credential"

    class Group(models.TextChoices):
        INTEGRATION = "INTEGRATION"

    class Status(models.TextChoices):
        ACTIVE = "ACTIVE"
        INACTIVE = "INACTIVE"

    class Environment(models.TextChoices):
        SANDBOX = "sandbox"
        PRODUCTION = "production"

    class PrincipalType(models.TextChoices):
        MERCHANT = "MERCHANT"

    group = models.CharField(max_length=32, choices=Group.choices)
    code = models.CharField(max_length=64, help_text="What is configured, e.g. the provider's code.")
    name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    environment = models.CharField(max_length=16, choices=Environment.choices, default=Environment.SANDBOX)
    principal_type = models.CharField(max_length=16, choices=PrincipalType.choices)
    principal_id = models.BigIntegerField(help_text="The principal's id, e.g. the merchant's.")
    settings = models.JSONField(default=dict, blank=True, help_text="Settings that are not secret.")
    credential = models.TextField(blank=True, default="", editable=False)
    credential_mask = models.CharField(max_length=16, blank=True, default="", editable=False)
    created_by = models.BigIntegerField(null=True, blank=True, db_index=True)

    class Meta(BaseModel.Meta):
        db_table = "configuration"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["group", "principal_type", "principal_id"], name="configuration_principal_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["group", "principal_type", "principal_id", "code", "environment"],
                condition=models.Q(deleted_at__isnull=True),
                name="configuration_unique_alive",
            )
        ]

    def __str__(self) -> str:
        return f"{self.group} {self.code} ({self.environment}) of {self.principal_type}:{self.principal_id}"
