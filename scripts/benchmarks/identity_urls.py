"""The product's routes plus /bench/identity/users/<id>: the read behind GET /v1/api/identity/users/me
(same selector, same serializer, same stack) without authentication, so the two differ only by the
token verification."""

from django.urls import path
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.identity import selectors
from apps.identity.serializers import UserSerializer
from merchant_platform.urls import handler400, handler403, handler404, handler500
from merchant_platform.urls import urlpatterns as platform_urlpatterns

__all__ = ("handler400", "handler403", "handler404", "handler500", "urlpatterns")


class UnauthenticatedUserView(APIView):
    authentication_classes = ()
    permission_classes = (AllowAny,)

    def get(self, request, pk: int):
        user = selectors.user_get(pk)
        if user is None or not user.is_active:
            raise NotFound()
        return Response(UserSerializer(user).data)


urlpatterns = [path("bench/identity/users/<int:pk>", UnauthenticatedUserView.as_view()), *platform_urlpatterns]
