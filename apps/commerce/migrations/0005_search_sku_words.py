from django.db import migrations

# SKUs are now indexed as their words (apps/commerce/selectors.py, search_words): `ABC-123` as
# `abc` and `123`, not `abc` and the signed number `-123` no query matches. The documents written
# before are recomputed from their stored columns, as services.search_sync_products computes them.
SKU_WORDS = """
UPDATE product_search_document
SET search_vector = setweight(to_tsvector('simple'::regconfig, COALESCE(name, '')), 'A')
    || setweight(to_tsvector('simple'::regconfig, regexp_replace(lower(skus), '[^[:alnum:]]+', ' ', 'g')), 'A')
    || setweight(to_tsvector('simple'::regconfig, COALESCE(description, '')), 'B')
WHERE skus ~ '[^[:alnum:][:space:]]'
"""


class Migration(migrations.Migration):
    dependencies = [
        ("commerce", "0004_sale_orders"),
    ]

    operations = [migrations.RunSQL(SKU_WORDS, migrations.RunSQL.noop)]
