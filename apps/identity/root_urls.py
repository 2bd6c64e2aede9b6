"""Identity's route at the site root: the key set at /jw-certs (spec 1.5, outside the API base)."""

from django.urls import path

from apps.identity import views

urlpatterns = [path("jw-certs", views.jwks_view, name="identity-jwks")]
