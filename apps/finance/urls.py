"""Routes of the service, relative to its prefix (/v1/api/finance)."""

from rest_framework.routers import SimpleRouter

from apps.finance.views import AccountViewSet, GeneralLedgerViewSet, LineViewSet, ReportViewSet, VoucherViewSet

router = SimpleRouter(trailing_slash=False)
router.register("accounts", AccountViewSet, basename="finance-account")
router.register("vouchers", VoucherViewSet, basename="finance-voucher")
router.register("transactions", LineViewSet, basename="finance-transaction")
router.register("reports", ReportViewSet, basename="finance-report")
router.register("internal/general-ledger", GeneralLedgerViewSet, basename="finance-general-ledger")

urlpatterns = router.urls
