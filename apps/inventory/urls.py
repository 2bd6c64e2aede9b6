"""Routes of the service, relative to its prefix (/v1/api/inventory)."""

from rest_framework.routers import SimpleRouter

from apps.inventory.views import (
    ItemViewSet,
    LocationViewSet,
    PurchaseOrderViewSet,
    ReservationViewSet,
    StockViewSet,
    TicketViewSet,
    TrackingViewSet,
)

router = SimpleRouter(trailing_slash=False)
router.register("locations", LocationViewSet, basename="inventory-location")
router.register("items", ItemViewSet, basename="inventory-item")
router.register("stock", StockViewSet, basename="inventory-stock")
router.register("tracking", TrackingViewSet, basename="inventory-tracking")
router.register("tickets", TicketViewSet, basename="inventory-ticket")
router.register("purchase-orders", PurchaseOrderViewSet, basename="inventory-purchase-order")
router.register("internal/reservations", ReservationViewSet, basename="inventory-reservation")

urlpatterns = router.urls
