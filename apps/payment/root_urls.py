"""The provider IPN callbacks (spec 4.9), outside the service prefix: both gateways route /api/pay/
to payment (deploy/nginx). A WORKER process (spec 1.4) serves none."""

from django.conf import settings
from django.urls import path

from apps.payment import views

urlpatterns = (
    []
    if settings.PAYMENT_MODE == "WORKER"
    else [
        path("api/pay/provider/qr-mms/ipn", views.QrIpnView.as_view(), name="payment-ipn-qr"),
        path("api/pay/provider/phone-pos/ipn", views.PhonePosIpnView.as_view(), name="payment-ipn-phone-pos"),
        path("api/pay/provider/smart-pos/ipn", views.SmartPosIpnView.as_view(), name="payment-ipn-smart-pos"),
        path("api/pay/system/ipn", views.SystemIpnView.as_view(), name="payment-ipn-system"),
        path("api/pay/provider/refund/ipn", views.RefundCallbackView.as_view(), name="payment-refund-callback"),
    ]
)
