"""REST `Idempotency-Key` (the IETF httpapi draft, docs/architecture.md section 10) for POSTs that create
money or stock records, shared by every service that takes one.

A service declares the record in its own models.py (so the table lives in its schema):

    class IdempotencyKey(IdempotencyKeyBase):
        class Meta(IdempotencyKeyBase.Meta):
            db_table = "<service>_idempotency_key"

and a viewset mixes in `IdempotentCreateMixin`, naming that model and the service's database:

    class VoucherViewSet(IdempotentCreateMixin, ServiceViewSet):
        idempotency_keys, idempotency_using = IdempotencyKey, services.DB

        def create(self, request):
            return self.create_idempotently(
                VoucherCreateSerializer, operation="vouchers.create",
                write=lambda data: Created(services.voucher_post(**data).id),
                answer=lambda voucher_id: VoucherDetailSerializer(selectors.voucher(voucher_id)).data,
            )

(`self.idempotent(operation, write=..., answer=...)` for any other POST it keys, e.g. an action on a
record.)

The first request claims the key (committed at once, so a concurrent retry sees it running), then
`write` runs in one transaction with the key's `result_id`: the record and the key commit together,
so a retry either finds the result to replay or finds nothing written. A retry with the same key and
body replays the first answer (status and the record as it is now, header `Idempotent-Replayed:
true`); 409 IDEMPOTENCY_KEY_IN_PROGRESS while the first request runs; 422 IDEMPOTENCY_KEY_REUSED for
the key with another body. A first request that failed frees its key, so the client may retry it; one
whose process died is taken over after STALE_SECONDS.

`atomic=False` is for writes that call other services (a saga) and are idempotent by themselves: the
key is linked to the result once `write` returns, and a retry after a crash in between runs the write
again, which then finds its own earlier effects.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import models, transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.response import Response

from merchant_platform.errors import ApiError, Conflict, InvalidInput
from merchant_platform.policy import CREATE
from merchant_platform.views import actor_of

STALE_SECONDS = 120  # an unfinished first request older than this died with its process
KEY_FORMAT = re.compile(r"^[\x21-\x7e]{1,255}$")

HEADER = OpenApiParameter(
    "Idempotency-Key",
    location=OpenApiParameter.HEADER,
    required=False,
    description="1-255 visible ASCII characters. The same key and body replay the first answer (header "
    "Idempotent-Replayed: true); 409 IDEMPOTENCY_KEY_IN_PROGRESS while the first request runs; 422 "
    "IDEMPOTENCY_KEY_REUSED for the same key with another body.",
)
RESPONSES = {
    409: OpenApiResponse(description="IDEMPOTENCY_KEY_IN_PROGRESS, or the operation's own conflict."),
    422: OpenApiResponse(description="IDEMPOTENCY_KEY_REUSED"),
}


class IdempotencyKeyBase(models.Model):
    """The caller, the operation, the key, a hash of the body, and the first request's result."""

    id = models.BigAutoField(primary_key=True)
    caller = models.CharField(max_length=64)  # user:<id> or service:<name>
    operation = models.CharField(max_length=64)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    result_id = models.BigIntegerField(null=True, blank=True)  # set with the write, in its transaction
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()

    class Meta:
        abstract = True
        constraints = [models.UniqueConstraint(fields=["caller", "operation", "key"], name="%(app_label)s_idempotency_key_unique")]
        indexes = [models.Index(fields=["started_at"], name="%(app_label)s_idempotency_started")]

    def __str__(self) -> str:
        return f"{self.caller} {self.operation} {self.key}"


@dataclass(frozen=True)
class Created:
    """What a write made: the record's id, the status its answer carries, and what to do once it
    committed, before answering (only the request that wrote does it, never a replay)."""

    id: int
    status: int = 201
    then: Callable[[], object] | None = None


def idempotent(
    request,
    model: type[IdempotencyKeyBase],
    *,
    using: str,
    operation: str,
    write: Callable[[], Created],
    answer: Callable[[int], Any],
    atomic: bool = True,
) -> Response:
    """Answer `answer(created.id)` for `write()`, under the request's Idempotency-Key when it has one."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return _answer(write(), answer)
    if not KEY_FORMAT.match(key):
        raise InvalidInput({"Idempotency-Key": "Give 1-255 visible ASCII characters."})
    body_hash = hashlib.sha256(json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()
    record = _claim(model, using, caller=actor_of(request), operation=operation, key=key, request_hash=body_hash)
    if record.result_id is not None:
        return Response(answer(record.result_id), status=record.response_status or 200, headers={"Idempotent-Replayed": "true"})
    keys = model.objects.using(using).filter(pk=record.pk)
    try:
        if atomic:
            with transaction.atomic(using=using):
                created = write()
                keys.update(result_id=created.id, response_status=created.status)
        else:
            created = write()
            keys.update(result_id=created.id, response_status=created.status)
    except BaseException:
        keys.filter(result_id__isnull=True).delete()
        raise
    return _answer(created, answer)


# For an OperatorViewSet whose POSTs take an Idempotency-Key (a comment, not a docstring: the
# OpenAPI description of a view comes from its bases' docstrings).
class IdempotentCreateMixin:
    idempotency_keys: type[IdempotencyKeyBase]  # the service's IdempotencyKey
    idempotency_using: str  # the service's database alias (services.DB)

    def idempotent(self, operation: str, *, write: Callable[[], Created], answer: Callable[[int], Any], atomic: bool = True) -> Response:
        """`idempotent()` for this request, with the service's key model and database."""
        return idempotent(
            self.request,
            self.idempotency_keys,
            using=self.idempotency_using,
            operation=operation,
            write=write,
            answer=answer,
            atomic=atomic,
        )

    def create_idempotently(
        self, serializer_class, *, operation: str, write: Callable[[dict], Created], answer: Callable[[int], Any]
    ) -> Response:
        """Validate the body, check the create permission in its tenant (`policy_tenant_field`), then
        `write(data)` once per Idempotency-Key and answer `answer(id)`."""
        data = self.validated(serializer_class)
        self.authorize_placement(CREATE, domain=data[self.policy_tenant_field])
        return self.idempotent(operation, write=lambda: write(data), answer=answer)


def _answer(created: Created, answer: Callable[[int], Any]) -> Response:
    if created.then is not None:
        created.then()
    return Response(answer(created.id), status=created.status)


def _claim(model, using: str, *, caller: str, operation: str, key: str, request_hash: str) -> IdempotencyKeyBase:
    """The key's record: new (or taken over from a dead first request) with no result, or finished."""
    now = timezone.now()
    with transaction.atomic(using=using):
        record, created = model.objects.using(using).get_or_create(
            caller=caller, operation=operation, key=key, defaults={"request_hash": request_hash, "started_at": now}
        )
        if created:
            return record
        record = model.objects.using(using).select_for_update().get(pk=record.pk)
        if record.request_hash != request_hash:
            raise ApiError("This Idempotency-Key was used with another request body.", code="IDEMPOTENCY_KEY_REUSED", status_code=422)
        if record.result_id is not None:
            return record
        if (now - record.started_at).total_seconds() < STALE_SECONDS:
            raise Conflict("A request with this Idempotency-Key is still running.", code="IDEMPOTENCY_KEY_IN_PROGRESS")
        record.started_at = now
        record.save(using=using, update_fields=["started_at"])
        return record
