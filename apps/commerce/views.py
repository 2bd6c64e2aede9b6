"""HTTP of commerce: each view translates a request into a service call and back.

Every route requires a user token (or HTTP Basic for platform services) and goes through the policy
layer (merchant_platform.policy). A merchant is its own tenant (`policy_tenant_field = "id"`):
a user reaches the merchants it belongs to (a `join_domain` policy, or a role held there) where its
policies allow, and OWNER the merchants it created. Catalog records and integrations belong to
their merchant (`merchant_id`, `principal_id`): another merchant's record answers 404.
"""

from __future__ import annotations

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from apps.commerce import selectors, services, storage
from apps.commerce.filters import IntegrationFilter, MediaFilter, MerchantFilter, ProductFilter, VariantFilter
from apps.commerce.models import Merchant, Product, ProductMedia, ProductSearchDocument, ProductVariant
from apps.commerce.serializers import (
    IntegrationCreateSerializer,
    IntegrationSerializer,
    IntegrationUpdateSerializer,
    MediaSerializer,
    MediaUploadSerializer,
    MerchantCreateSerializer,
    MerchantSerializer,
    MerchantSummarySerializer,
    MerchantUpdateSerializer,
    ProductCreateSerializer,
    ProductSerializer,
    ProductUpdateSerializer,
    SearchQuerySerializer,
    SearchResultSerializer,
    VariantCreateSerializer,
    VariantSerializer,
    VariantUpdateSerializer,
)
from merchant_platform.errors import NotFound
from merchant_platform.policy import CREATE, READ, PolicyPermission, can_without_tenant, scope_queryset
from merchant_platform.views import ServiceViewSet, user_id_of

MERCHANT, PRODUCT, VARIANT, INTEGRATION = "commerce.Merchant", "commerce.Product", "commerce.ProductVariant", "commerce.Integration"
MEDIA = "commerce.ProductMedia"
DOWNLOAD_CHUNK_BYTES = 64 * 1024
SLUG_TAKEN = OpenApiResponse(description="MERCHANT_SLUG_TAKEN: another live merchant has this slug.")
SKU_TAKEN = OpenApiResponse(description="SKU_TAKEN: another live variant of the merchant has this SKU.")


class MerchantViewSet(ServiceViewSet):
    """Lists filter and order; a record route needs none of the filters' cost."""

    policy_resource = MERCHANT
    policy_tenant_field = "id"  # a merchant is its own tenant
    policy_owner_field = "created_by"
    policy_actions = {"summary": READ}
    serializer_class = MerchantSerializer
    filterset_class = MerchantFilter
    queryset = Merchant.objects.all()  # PolicyScopedMixin.get_queryset scopes it per caller

    @extend_schema(request=MerchantCreateSerializer, responses={201: MerchantSerializer, 409: SLUG_TAKEN})
    def create(self, request):
        """Create a merchant; its creator becomes a member of it (join_domain) and, as OWNER, reaches it.
        A new merchant belongs to no tenant yet: creating one needs the permission everywhere
        (OWNER held everywhere, as a seller has, or a global role)."""
        data = self.validated(MerchantCreateSerializer)
        if not can_without_tenant(request.user, MERCHANT, CREATE, as_owner=True):
            raise exceptions.PermissionDenied(PolicyPermission.message)
        merchant = services.merchant_create(**data, created_by=user_id_of(request))
        return Response(MerchantSerializer(merchant).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=MerchantUpdateSerializer, responses={200: MerchantSerializer, 409: SLUG_TAKEN})
    def partial_update(self, request, pk=None):
        merchant = self.get_object()
        data = self.validated(MerchantUpdateSerializer, record=merchant)
        return Response(MerchantSerializer(services.merchant_update(merchant_id=merchant.id, **data)).data)

    @extend_schema(responses={200: MerchantSummarySerializer})
    @action(detail=True, methods=["get"])
    def summary(self, request, pk=None):
        """The merchant's footer summary: products and variants by status, media stored, integrations
        by status. Cached in Redis (`X-Summary-Cache: hit|miss`); writes that change it retire it."""
        summary, cached = services.merchant_summary(self.get_object().id)
        return Response(summary, headers={"X-Summary-Cache": "hit" if cached else "miss"})

    @extend_schema(responses={204: None, 409: OpenApiResponse(description="MERCHANT_NOT_EMPTY: delete its products first.")})
    def destroy(self, request, pk=None):
        services.merchant_delete(merchant_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProductViewSet(ServiceViewSet):
    """Lists filter and order; a record route needs none of the filters' cost."""

    policy_resource = PRODUCT
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    policy_actions = {"search": READ}
    serializer_class = ProductSerializer
    filterset_class = ProductFilter
    queryset = Product.objects.all()

    @extend_schema(request=ProductCreateSerializer, responses={201: ProductSerializer})
    def create(self, request):
        data = self.validated(ProductCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        services.tax_group_check(data["merchant_id"], data.get("tax_group_id"))
        product = services.product_create(**data, created_by=user_id_of(request))
        return Response(ProductSerializer(product).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ProductUpdateSerializer, responses={200: ProductSerializer})
    def partial_update(self, request, pk=None):
        product = self.get_object()
        data = self.validated(ProductUpdateSerializer, record=product)
        services.tax_group_check(product.merchant_id, data.get("tax_group_id"))
        return Response(ProductSerializer(services.product_update(product_id=product.id, **data)).data)

    @extend_schema(parameters=[SearchQuerySerializer], responses={200: SearchResultSerializer})
    @action(detail=False, methods=["get"])
    def search(self, request):
        """Full-text search over the products the caller may read, from the search index (live
        PUBLISHED and ARCHIVED products). While the index is unavailable or behind the catalog, the
        answer comes from a plain query on the catalog (`X-Search-Source: fallback`, with
        `X-Search-Fallback-Reason`), without highlights or facets."""
        params = SearchQuerySerializer(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        documents = scope_queryset(
            ProductSearchDocument.objects.all(), request.user, PRODUCT, tenant_field="merchant_id", owner_field="created_by"
        )
        result, reason = selectors.product_search(documents, self.get_queryset(), params.validated_data)
        headers = {"X-Search-Source": result["source"]}
        if reason:
            headers["X-Search-Fallback-Reason"] = reason
        return Response(SearchResultSerializer(result).data, headers=headers)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Soft-delete the product with its variants and media."""
        services.product_delete(product_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class VariantViewSet(ServiceViewSet):
    """Lists filter and order; a record route needs none of the filters' cost."""

    policy_resource = VARIANT
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    serializer_class = VariantSerializer
    filterset_class = VariantFilter
    queryset = ProductVariant.objects.all()

    @extend_schema(request=VariantCreateSerializer, responses={201: VariantSerializer, 409: SKU_TAKEN})
    def create(self, request):
        data = self.validated(VariantCreateSerializer)
        # Looked up among the products the caller may read: another merchant's product answers the
        # same 404 as a missing one.
        visible = scope_queryset(Product.objects.all(), request.user, PRODUCT, tenant_field="merchant_id", owner_field="created_by")
        product = visible.filter(pk=data["product_id"]).first()
        if product is None:
            raise NotFound("No product has this id.")
        self.authorize(CREATE, domain=product.merchant_id)
        variant = services.variant_create(**data, created_by=user_id_of(request))
        return Response(VariantSerializer(variant).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=VariantUpdateSerializer, responses={200: VariantSerializer, 409: SKU_TAKEN})
    def partial_update(self, request, pk=None):
        variant = self.get_object()
        data = self.validated(VariantUpdateSerializer, record=variant)
        return Response(VariantSerializer(services.variant_update(variant_id=variant.id, **data)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.variant_delete(variant_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class IntegrationViewSet(ServiceViewSet):
    """A merchant's provider integrations (spec 2.1 Configuration, group INTEGRATION). The credential
    is write-only: every answer carries its mask, never the plaintext or the ciphertext."""

    policy_resource = INTEGRATION
    policy_tenant_field = "principal_id"  # the merchant
    policy_owner_field = "created_by"
    serializer_class = IntegrationSerializer
    filterset_class = IntegrationFilter
    queryset = selectors.integrations()

    @extend_schema(
        request=IntegrationCreateSerializer,
        responses={201: IntegrationSerializer, 409: OpenApiResponse(description="INTEGRATION_EXISTS: same code and environment.")},
    )
    def create(self, request):
        data = self.validated(IntegrationCreateSerializer)
        self.authorize_placement(CREATE, domain=data["merchant_id"])
        integration = services.integration_create(**data, created_by=user_id_of(request))
        return Response(IntegrationSerializer(integration).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=IntegrationUpdateSerializer, responses={200: IntegrationSerializer})
    def partial_update(self, request, pk=None):
        integration = self.get_object()
        data = self.validated(IntegrationUpdateSerializer, record=integration)
        return Response(IntegrationSerializer(services.integration_update(integration_id=integration.id, **data)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.integration_delete(integration_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MediaViewSet(ServiceViewSet):
    """Product images: uploaded as multipart (`productId`, `file`), stored in a private bucket, read
    through a short-lived presigned URL (`url`) or streamed by `/media/{id}/download`."""

    policy_resource = MEDIA
    policy_tenant_field = "merchant_id"
    policy_owner_field = "created_by"
    policy_actions = {"download": "read"}
    parser_classes = (MultiPartParser,)
    serializer_class = MediaSerializer
    filterset_class = MediaFilter
    queryset = ProductMedia.objects.all()

    @extend_schema(
        request={"multipart/form-data": MediaUploadSerializer},
        responses={
            201: MediaSerializer,
            413: OpenApiResponse(description="MEDIA_TOO_LARGE"),
            415: OpenApiResponse(description="MEDIA_TYPE_NOT_ALLOWED: only JPEG, PNG, GIF and WebP (sniffed from the bytes)."),
        },
    )
    def create(self, request):
        data = self.validated(MediaUploadSerializer)
        visible = scope_queryset(Product.objects.all(), request.user, PRODUCT, tenant_field="merchant_id", owner_field="created_by")
        product = visible.filter(pk=data["product_id"]).first()
        if product is None:
            raise NotFound("No product has this id.")
        self.authorize(CREATE, domain=product.merchant_id)
        upload = data["file"]
        media = services.media_upload(
            product_id=product.id,
            data=upload.read(settings.COMMERCE_MEDIA_MAX_BYTES + 1),  # one byte over is enough to refuse it
            filename=upload.name or "",
            created_by=user_id_of(request),
        )
        return Response(MediaSerializer(media).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.media_delete(media_id=self.get_object().id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        media = self.get_object()
        body, length = storage.open_object(media.object_key)
        response = StreamingHttpResponse(body.iter_chunks(DOWNLOAD_CHUNK_BYTES), content_type=media.content_type)
        response["Content-Length"] = str(length)
        response["Content-Disposition"] = f'attachment; filename="{media.id}"'
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "private, no-store"
        return response
