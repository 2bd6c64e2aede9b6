"""The platform kernel: what every service of Merchant Platform shares."""

from merchant_platform.celery import app as celery_app

__all__ = ("celery_app",)
