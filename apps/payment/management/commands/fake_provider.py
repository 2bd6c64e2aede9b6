"""`manage.py fake_provider [--secret S] [--port P] [--retry-interval SECONDS] [--refund-mode MODE]`: run
the fake payment provider (apps/payment/fake_provider.py) in the foreground, for development. scripts/run starts it
with the development defaults: PAYMENT_FAKE_PROVIDER_SECRET (the development integration's
credential) on PAYMENT_FAKE_PROVIDER_PORT."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.payment.fake_provider import FakeProvider


class Command(BaseCommand):
    help = "Run the fake payment provider (QR payloads, signed IPN callbacks with the spec's retries)."

    def add_arguments(self, parser):
        parser.add_argument("--secret", help="the integration's credential, the HMAC key (default: PAYMENT_FAKE_PROVIDER_SECRET)")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, help="default: PAYMENT_FAKE_PROVIDER_PORT")
        parser.add_argument("--retry-interval", type=float, default=None, help="seconds between IPN retries (default: the spec's)")
        parser.add_argument(
            "--refund-mode",
            choices=("sync", "fail", "async"),
            default="sync",
            help="refunds answered SUCCEEDED at once, FAILED at once, or accepted and called back on POST /refunds/<ref>/complete",
        )

    def handle(self, *args, secret, host, port, retry_interval, refund_mode, **options):
        secret = secret or settings.PAYMENT_FAKE_PROVIDER_SECRET
        if not secret:
            raise CommandError("no secret: pass --secret (PAYMENT_FAKE_PROVIDER_SECRET is made only under APP_ENV=development)")
        port = settings.PAYMENT_FAKE_PROVIDER_PORT if port is None else port
        provider = FakeProvider(secret=secret, host=host, port=port, retry_interval_seconds=retry_interval)
        provider.refund_mode = refund_mode
        self.stdout.write(f"fake provider on {provider.url}")
        self.stdout.flush()
        provider.serve_forever()
