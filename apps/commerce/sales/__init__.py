"""Sale orders (issue 20): the sale side of payments, in commerce. The same shape as a service:
`models.py` (its records, registered with commerce by apps/commerce/models.py), `selectors.py`,
`services/` (every write by aggregate: drafts, the placing saga, payment webhooks in, settlement,
closing), `clients.py` (the HTTP calls to inventory, taxation and payment), `serializers.py`,
`views.py`; docs/services/commerce.md, "Sale orders"."""
