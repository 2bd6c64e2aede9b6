from django.core.management.base import BaseCommand

from merchant_platform.seeds import run_seeds


class Command(BaseCommand):
    help = "Run every active service's seeds (idempotent: running twice changes nothing)."

    def handle(self, *args, **options):
        seeded = run_seeds()
        self.stdout.write(f"seeded: {', '.join(seeded) or 'nothing to seed'}")
