"""Sale orders (issue 20): the sale side of payments, in commerce. The same shape as a service:
`services.py` (every write, the placing saga, payment webhooks in, expiry), `selectors.py`,
`clients.py` (the HTTP calls to inventory, taxation and payment), `serializers.py`, `views.py`.
Records are in apps/commerce/models.py; docs/services/commerce.md, "Sale orders"."""
