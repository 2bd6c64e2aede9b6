"""`manage.py fake_provider --secret S [--port P] [--retry-interval SECONDS]`: run the fake payment
provider (apps/payment/fake_provider.py) in the foreground, for development."""

from django.core.management.base import BaseCommand

from apps.payment.fake_provider import FakeProvider


class Command(BaseCommand):
    help = "Run the fake payment provider (QR payloads, signed IPN callbacks with the spec's retries)."

    def add_arguments(self, parser):
        parser.add_argument("--secret", required=True, help="the merchant integration's credential (the HMAC key)")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=31081)
        parser.add_argument("--retry-interval", type=float, default=None, help="seconds between IPN retries (default: the spec's)")

    def handle(self, *args, secret, host, port, retry_interval, **options):
        provider = FakeProvider(secret=secret, host=host, port=port, retry_interval_seconds=retry_interval)
        self.stdout.write(f"fake provider on {provider.url}")
        provider.serve_forever()
