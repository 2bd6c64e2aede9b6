"""Routes of the service, relative to its prefix."""

urlpatterns: list = []
