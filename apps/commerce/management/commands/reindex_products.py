"""`manage.py reindex_products`: rebuild commerce's search index from the catalog tables."""

from django.core.management.base import BaseCommand

from apps.commerce import services


class Command(BaseCommand):
    help = "Rebuild the product search index from scratch (every live PUBLISHED or ARCHIVED product)."

    def handle(self, *args, **options):
        indexed = services.search_reindex()
        self.stdout.write(f"indexed {indexed} products")
