"""`manage.py reindex_products`: rebuild commerce's search index from the catalog tables."""

from django.core.management.base import BaseCommand

from apps.commerce import services


class Command(BaseCommand):
    help = "Rebuild the product search index (every live PUBLISHED or ARCHIVED product), a batch of products per transaction."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=services.REINDEX_BATCH, help="products per transaction")

    def handle(self, *args, **options):
        indexed = services.search_reindex(batch_size=options["batch_size"])
        self.stdout.write(f"indexed {indexed} products")
