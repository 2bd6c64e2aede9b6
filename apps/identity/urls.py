"""Routes of identity, relative to /v1/api/identity."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from apps.identity import otp, views

router = SimpleRouter(trailing_slash=False)
router.register("users", views.UserViewSet, basename="identity-user")
router.register("policies", views.PolicyViewSet, basename="identity-policy")
router.register("internal/users", views.InternalUserViewSet, basename="identity-internal-user")

urlpatterns = [
    path("auth/sign-up", views.SignUpView.as_view(), name="identity-sign-up"),
    path("auth/sign-in", views.SignInView.as_view(), name="identity-sign-in"),
    path("auth/refresh", views.RefreshView.as_view(), name="identity-refresh"),
    path("auth/sign-out", views.SignOutView.as_view(), name="identity-sign-out"),
    re_path(rf"^auth/otp/(?P<namespace>{'|'.join(otp.NAMESPACES)})/request$", views.OtpRequestView.as_view(), name="identity-otp-request"),
    path(f"auth/otp/{otp.VERIFY_EMAIL}/verify", views.VerifyEmailView.as_view(), name="identity-verify-email"),
    path(f"auth/otp/{otp.PHONE_AUTH}/verify", views.PhoneAuthVerifyView.as_view(), name="identity-phone-auth"),
    path(f"auth/otp/{otp.FORGOT_PASSWORD}/reset", views.PasswordResetView.as_view(), name="identity-password-reset"),
    path("users/me", views.MeView.as_view(), name="identity-me"),
    path("users/me/password", views.ChangePasswordView.as_view(), name="identity-change-password"),
    *router.urls,
]
