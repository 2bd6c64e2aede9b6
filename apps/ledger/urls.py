"""Routes of the service, relative to its prefix (/v1/api/ledger). Served only by the `api` role
(spec 1.4): a worker-only process answers its probes and nothing else."""

from django.conf import settings
from rest_framework.routers import SimpleRouter

from apps.ledger.views import LedgerJobViewSet

router = SimpleRouter(trailing_slash=False)
router.register("ledgers", LedgerJobViewSet, basename="ledger-job")

urlpatterns = router.urls if "api" in settings.APP_ENV_APPLICATION_ROLES else []
