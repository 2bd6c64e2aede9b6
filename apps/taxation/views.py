"""HTTP of taxation: each view translates a request into a service call and back.

Every route accepts a user token (JWT) and HTTP Basic service credentials (spec 5: "taxation declares
strategies jwt and basic on every route") and goes through the policy layer; the tenant of every
record is its merchant (`merchant_id`).
"""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.taxation import services
from apps.taxation.filters import RoundingPolicyFilter, TaxGroupFilter, TaxSetFilter
from apps.taxation.models import RoundingPolicy, TaxGroup, TaxItem, TaxSet
from apps.taxation.serializers import (
    DeprovisionSerializer,
    ProvisioningSerializer,
    ProvisionSerializer,
    QuoteRequestSerializer,
    QuoteSerializer,
    RoundingPolicySerializer,
    RoundingPolicyUpdateSerializer,
    TaxGroupSerializer,
    TaxGroupUpdateSerializer,
    TaxSetSerializer,
    quote_representation,
)
from merchant_platform.policy import CREATE, UPDATE, scope_queryset
from merchant_platform.views import SERVICE_AUTHENTICATION, OperatorViewSet, ServiceViewSet, user_id_of

TAX_GROUP, TAX_SET, ROUNDING_POLICY, QUOTE = "taxation.TaxGroup", "taxation.TaxSet", "taxation.RoundingPolicy", "taxation.Quote"
TENANT = "merchant_id"

TAX_GROUP_NOT_FOUND_OR_PRODUCT = OpenApiResponse(
    description="TAX_GROUP_NOT_FOUND (logged at error level, spec 7), or PRODUCT_NOT_FOUND: no live product of the group's merchant."
)
TAX_GROUP_HAS_NO_ITEMS = OpenApiResponse(description="TAX_GROUP_HAS_NO_ITEMS: no item in effect now or later (logged at error level).")


def live_groups():
    """Groups with their live items, in order, in one extra query."""
    return TaxGroup.objects.prefetch_related(Prefetch("items", queryset=TaxItem.objects.order_by("position", "id")))


@extend_schema_view(
    create=extend_schema(request=TaxGroupSerializer, responses={201: TaxGroupSerializer}),
    partial_update=extend_schema(request=TaxGroupUpdateSerializer, responses={200: TaxGroupSerializer}),
    destroy=extend_schema(
        description="Soft delete (with its items).",
        responses={204: None, 409: OpenApiResponse(description="TAX_GROUP_IN_USE: products are provisioned with it.")},
    ),
)
class TaxGroupViewSet(mixins.CreateModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin, ServiceViewSet):
    """Tax groups of merchants with their items (spec 2.1)."""

    policy_resource = TAX_GROUP
    policy_tenant_field = TENANT
    filterset_class = TaxGroupFilter
    http_method_names = ("get", "post", "patch", "delete", "head", "options")

    queryset = live_groups()  # PolicyScopedMixin.get_queryset scopes it per caller

    def get_serializer_class(self):
        return TaxGroupUpdateSerializer if self.action == "partial_update" else TaxGroupSerializer

    def perform_create(self, serializer):
        self.policy_create_kwargs(serializer.validated_data)
        group = services.tax_group_create(**serializer.validated_data, created_by=user_id_of(self.request))
        serializer.instance = live_groups().get(pk=group.pk)

    def perform_update(self, serializer):
        group = services.tax_group_update(tax_group_id=serializer.instance.id, **serializer.validated_data)
        serializer.instance = live_groups().get(pk=group.pk)

    def perform_destroy(self, instance):
        services.tax_group_delete(tax_group_id=instance.id)


class TaxSetViewSet(ServiceViewSet):
    """Tax sets: every provisioning of a product, ACTIVE or DEACTIVATED (its history). Written only
    by provisioning."""

    policy_resource = TAX_SET
    policy_tenant_field = TENANT
    serializer_class = TaxSetSerializer
    filterset_class = TaxSetFilter

    queryset = TaxSet.objects.all()


class TaxProvisioningViewSet(OperatorViewSet):
    """Spec 4.6: provision a product with a tax group, or deprovision it. Both answer 200 with what
    was done (ProvisioningSerializer); repeating either changes nothing."""

    authentication_classes = SERVICE_AUTHENTICATION
    policy_resource = TAX_SET
    policy_tenant_field = TENANT
    queryset = TaxSet.objects.all()
    serializer_class = ProvisioningSerializer

    def _visible(self, queryset, resource):
        return scope_queryset(queryset, self.request.user, resource, tenant_field=TENANT)

    def _authorize_leaving(self, product_id: int, group_merchant_id: int | None) -> None:
        """Deactivating the product's active set in another merchant needs the right there too."""
        active = TaxSet.objects.filter(product_id=product_id, status=TaxSet.Status.ACTIVE).values_list(TENANT, flat=True).first()
        if active is not None and active != group_merchant_id:
            self.authorize("deprovision", domain=active)

    @extend_schema(
        request=ProvisionSerializer,
        responses={200: ProvisioningSerializer, 404: TAX_GROUP_NOT_FOUND_OR_PRODUCT, 422: TAX_GROUP_HAS_NO_ITEMS},
    )
    @action(detail=False, methods=["post"])
    def provision(self, request):
        data = self.validated(ProvisionSerializer)
        product_id, tax_group_id = data["product_id"], data["tax_group_id"]
        # Another tenant's group answers as a missing one.
        merchant_id = self._visible(TaxGroup.objects.filter(pk=tax_group_id), TAX_GROUP).values_list(TENANT, flat=True).first()
        if merchant_id is None:
            raise services.tax_group_not_found(tax_group_id, product_id=product_id)
        self.authorize("provision", domain=merchant_id)
        self._authorize_leaving(product_id, merchant_id)
        # The product must be a live one of that merchant (PRODUCT_NOT_FOUND otherwise).
        result = services.product_provision(product_id=product_id, tax_group_id=tax_group_id, merchant_id=merchant_id)
        return Response(ProvisioningSerializer(result).data)

    @extend_schema(request=DeprovisionSerializer, responses={200: ProvisioningSerializer})
    @action(detail=False, methods=["post"])
    def deprovision(self, request):
        product_id = self.validated(DeprovisionSerializer)["product_id"]
        # A set the caller cannot see answers as none (NOT_PROVISIONED): nothing leaks about it.
        merchant_id = (
            self._visible(TaxSet.objects.filter(product_id=product_id, status=TaxSet.Status.ACTIVE), TAX_SET)
            .values_list(TENANT, flat=True)
            .first()
        )
        if merchant_id is None:
            return Response(ProvisioningSerializer(services.Provisioning(services.NOT_PROVISIONED, None)).data)
        self.authorize("deprovision", domain=merchant_id)
        result = services.tax_set_deprovision(product_id=product_id, merchant_id=merchant_id)
        return Response(ProvisioningSerializer(result).data)


@extend_schema_view(
    create=extend_schema(request=RoundingPolicySerializer, responses={200: RoundingPolicySerializer}),
    partial_update=extend_schema(request=RoundingPolicyUpdateSerializer, responses={200: RoundingPolicySerializer}),
    destroy=extend_schema(description="Back to the default, LINE.", responses={204: None}),
)
class RoundingPolicyViewSet(mixins.UpdateModelMixin, mixins.DestroyModelMixin, ServiceViewSet):
    """Each merchant's rounding of quotes; a merchant without one rounds per LINE."""

    policy_resource = ROUNDING_POLICY
    policy_tenant_field = TENANT
    filterset_class = RoundingPolicyFilter
    http_method_names = ("get", "post", "patch", "delete", "head", "options")

    queryset = RoundingPolicy.objects.all()

    def get_serializer_class(self):
        return RoundingPolicyUpdateSerializer if self.action == "partial_update" else RoundingPolicySerializer

    def create(self, request):
        """Set a merchant's policy (creates it, or changes the existing one)."""
        data = self.validated(RoundingPolicySerializer)
        self.authorize_placement(CREATE, domain=data[TENANT])
        self.authorize(UPDATE, domain=data[TENANT])
        policy = services.rounding_policy_set(**data)
        return Response(RoundingPolicySerializer(policy).data)

    def perform_update(self, serializer):
        policy = serializer.instance
        serializer.instance = services.rounding_policy_set(
            merchant_id=policy.merchant_id, mode=serializer.validated_data.get("mode", policy.mode)
        )

    def perform_destroy(self, instance):
        services.rounding_policy_delete(rounding_policy_id=instance.id)


class QuoteViewSet(OperatorViewSet):
    """The taxes of a prospective sale (the sale-order service calls this). Reads only; needs
    `taxation.Quote.create` in the merchant."""

    authentication_classes = SERVICE_AUTHENTICATION
    policy_resource = QUOTE
    policy_tenant_field = TENANT
    queryset = TaxSet.objects.none()
    serializer_class = QuoteSerializer

    @extend_schema(
        request=QuoteRequestSerializer,
        responses={200: QuoteSerializer, 400: OpenApiResponse(description="VALIDATION_ERROR naming the field, e.g. lines.0.productId.")},
    )
    def create(self, request):
        data = self.validated(QuoteRequestSerializer)
        self.authorize(CREATE, domain=data[TENANT])
        quote = services.quote_compute(**data)
        return Response(quote_representation(quote), status=status.HTTP_200_OK)
