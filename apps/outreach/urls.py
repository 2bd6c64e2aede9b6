"""Routes of the service, relative to its prefix /v1/api/outreach."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.outreach import views

router = SimpleRouter(trailing_slash=False)
router.register("inquiries", views.InquiryViewSet, basename="outreach-inquiry")
router.register("subscribers", views.SubscriberViewSet, basename="outreach-subscriber")

urlpatterns = [
    path("inquiries/submit", views.InquirySubmitView.as_view(), name="outreach-inquiry-submit"),
    path("subscribers/subscribe", views.SubscribeView.as_view(), name="outreach-subscribe"),
    path("subscribers/confirm", views.ConfirmView.as_view(), name="outreach-confirm"),
    path("subscribers/unsubscribe", views.UnsubscribeView.as_view(), name="outreach-unsubscribe"),
    path("statistics", views.StatisticsView.as_view(), name="outreach-statistics"),
    *router.urls,
]
