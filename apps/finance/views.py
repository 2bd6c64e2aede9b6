"""HTTP of finance: each view translates a request into a service call and back.

Every route requires a user token (or HTTP Basic for platform services) and goes through the policy
layer (merchant_platform.policy). The tenant is the record's merchant (`merchant_id`): a user
sees the accounts, vouchers, lines and reports of the merchants it belongs to (a `join_domain`
policy, or a role held there) where its policies allow; any other merchant's record answers 404,
never 403 (spec 5, 7). The general-ledger export is for platform services only (HTTP Basic).
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterator

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.finance import selectors, services
from apps.finance.filters import AccountFilter, LineFilter, VoucherFilter
from apps.finance.models import Account, FinanceTransaction, IdempotencyKey, Voucher
from apps.finance.serializers import (
    AccountCreateSerializer,
    AccountSerializer,
    AccountUpdateSerializer,
    CountSerializer,
    GeneralLedgerPageSerializer,
    GeneralLedgerQuerySerializer,
    LineSerializer,
    PeriodQuerySerializer,
    StatementEntrySerializer,
    StatementHeadSerializer,
    StatementSerializer,
    TrialBalanceQuerySerializer,
    TrialBalanceSerializer,
    VoidSerializer,
    VoucherCreateSerializer,
    VoucherDetailSerializer,
    VoucherSerializer,
)
from merchant_platform import idempotency
from merchant_platform.authentication_classes import ServiceBasicAuthentication
from merchant_platform.errors import InvalidInput, NotFound
from merchant_platform.idempotency import Created, IdempotentCreateMixin
from merchant_platform.policy import CREATE, READ, IsServicePrincipal, scope_queryset
from merchant_platform.renderers import JSONRenderer
from merchant_platform.views import SERVICE_AUTHENTICATION, OperatorViewSet, ServiceViewSet, ValidatingMixin, user_id_of

ACCOUNT, VOUCHER, LINE = "finance.Account", "finance.Voucher", "finance.Transaction"
VOID = "void"


class AccountViewSet(ServiceViewSet):
    policy_resource = ACCOUNT
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    filtered_actions = ("list", "count")
    policy_actions = {"count": READ, "statement": READ}
    serializer_class = AccountSerializer
    filterset_class = AccountFilter
    queryset = Account.objects.all()  # PolicyScopedMixin.get_queryset scopes it per caller

    @extend_schema(
        request=AccountCreateSerializer, responses={201: AccountSerializer, 409: OpenApiResponse(description="ACCOUNT_CODE_TAKEN")}
    )
    def create(self, request):
        data = self.validated(AccountCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        account = services.account_create(**data, created_by=user_id_of(request))
        return Response(AccountSerializer(account).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=AccountUpdateSerializer, responses={200: AccountSerializer})
    def partial_update(self, request, pk=None):
        account = self.get_object()
        data = self.validated(AccountUpdateSerializer, record=account)
        return Response(AccountSerializer(services.account_update(account_id=account.id, **data)).data)

    @extend_schema(responses={200: CountSerializer})
    @action(detail=False, methods=["get"])
    def count(self, request):
        """How many accounts the list would hold (same filters, same tenant scope)."""
        return Response({"count": self.filter_queryset(self.get_queryset()).count()})

    @extend_schema(parameters=[PeriodQuerySerializer], responses={200: StatementSerializer})
    @action(detail=True, methods=["get"])
    def statement(self, request, pk=None):
        """The account's lines dated in the period with opening, running and closing balances,
        streamed: a period of any length is read and rendered STATEMENT_CHUNK lines at a time."""
        account = self.get_object()
        period = self.validated(PeriodQuerySerializer, request.query_params.dict())
        statement = selectors.account_statement(account=account, **period)
        response = StreamingHttpResponse(_statement_json(statement), content_type="application/json")
        response["Cache-Control"] = "private, no-store"
        return response


def _statement_json(statement: selectors.Statement) -> Iterator[bytes]:
    """The bytes StatementSerializer would render, in pieces: the head, the entries a chunk at a
    time, then the closing balance (known once the entries are read)."""
    render = JSONRenderer().render
    yield render(StatementHeadSerializer(statement).data)[:-1] + b',"entries":['
    # One serializer for every chunk, and to_representation rather than .data (which keeps what it
    # returns): a serializer per chunk is a reference cycle holding its chunk until the collector runs.
    entry = StatementEntrySerializer(many=True)
    entries, separator = statement.entries(), b""
    while chunk := list(itertools.islice(entries, selectors.STATEMENT_CHUNK)):
        yield separator + render(entry.to_representation(chunk))[1:-1]
        separator = b","
    yield b'],"closingBalance":' + render(statement.closing) + b"}"


class VoucherViewSet(IdempotentCreateMixin, ServiceViewSet):
    policy_resource = VOUCHER
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    idempotency_keys, idempotency_using = IdempotencyKey, services.DB
    serializer_class = VoucherSerializer
    filterset_class = VoucherFilter
    queryset = Voucher.objects.all()

    def get_serializer_class(self):
        return VoucherDetailSerializer if self.action == "retrieve" else VoucherSerializer

    @extend_schema(
        request=VoucherCreateSerializer,
        parameters=[idempotency.HEADER],
        responses={201: VoucherDetailSerializer, **idempotency.RESPONSES},
    )
    def create(self, request):
        """Post a balanced voucher (SALE, PAYMENT or ADJUSTMENT with a reason)."""
        return self.create_idempotently(
            VoucherCreateSerializer,
            operation="vouchers.create",
            write=lambda data: Created(services.voucher_post(**data, created_by=user_id_of(request)).id),
            answer=lambda voucher_id: VoucherDetailSerializer(Voucher.all_objects.get(pk=voucher_id)).data,
        )

    @extend_schema(
        request=VoidSerializer,
        responses={
            200: VoucherDetailSerializer,
            409: OpenApiResponse(
                description="VOUCHER_ALREADY_VOIDED, or VOUCHER_NOT_VOIDABLE (COGS, INVENTORY_ADJUSTMENT, REFUND, COGS_RETURN, REVERSAL)."
            ),
        },
    )
    @action(detail=True, methods=["post"], url_path="actions/void")
    def void(self, request, pk=None):
        """Void the voucher: a balanced REVERSAL voucher referencing it is posted."""
        voucher = self.get_object()
        data = self.validated(VoidSerializer)
        voided = services.voucher_void(voucher_id=voucher.id, **data, created_by=user_id_of(request))
        return Response(VoucherDetailSerializer(voided).data)


class LineViewSet(ServiceViewSet):
    """Posted lines (spec 2.1 FinanceTransaction), read-only."""

    policy_resource = LINE
    policy_tenant_field = "merchant_id"
    serializer_class = LineSerializer
    filterset_class = LineFilter
    queryset = FinanceTransaction.objects.all()


class ReportViewSet(OperatorViewSet):
    """Reports of one merchant; a merchant whose accounts the caller may not read answers 404."""

    authentication_classes = SERVICE_AUTHENTICATION
    policy_resource = ACCOUNT
    policy_tenant_field = "merchant_id"
    policy_actions = {"trial_balance": READ}

    @extend_schema(parameters=[TrialBalanceQuerySerializer], responses={200: TrialBalanceSerializer})
    @action(detail=False, methods=["get"], url_path="trial-balance")
    def trial_balance(self, request):
        """Every account's debits, credits and balance as of a date (default today), with totals per currency."""
        query = self.validated(TrialBalanceQuerySerializer, request.query_params.dict())
        visible = scope_queryset(
            Account.all_objects.filter(merchant_id=query["merchant_id"]), request.user, ACCOUNT, tenant_field="merchant_id"
        )
        if not visible.exists():
            raise NotFound("No merchant with books has this id.")
        report = selectors.trial_balance(merchant_id=query["merchant_id"], as_of=query.get("as_of") or timezone.localdate())
        return Response(TrialBalanceSerializer(report).data)


class GeneralLedgerViewSet(ValidatingMixin, viewsets.ViewSet):
    """For the ledger service (HTTP Basic): one merchant's posted lines of a period, page by page."""

    authentication_classes = (ServiceBasicAuthentication,)
    permission_classes = (IsServicePrincipal,)

    @extend_schema(parameters=[GeneralLedgerQuerySerializer], responses={200: GeneralLedgerPageSerializer})
    def list(self, request):
        query = self.validated(GeneralLedgerQuerySerializer, request.query_params.dict())
        after = None
        if query.get("cursor"):
            day, line_id = query["cursor"].split("_")
            try:
                after = (datetime.date.fromisoformat(day), int(line_id))
            except ValueError:
                raise InvalidInput({"cursor": "Give the nextCursor of the previous page."}) from None
        page = selectors.general_ledger_page(
            merchant_id=query["merchant_id"], date_from=query["date_from"], date_to=query["date_to"], after=after, limit=query["limit"]
        )
        return Response(GeneralLedgerPageSerializer({**query, **page}).data)
