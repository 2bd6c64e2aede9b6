"""Finance settings."""

# OpenAPI overrides of finance, merged into SPECTACULAR_SETTINGS only where finance is active.
FINANCE_OPENAPI_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        # Every kind (read), beside VoucherCreateKindEnum: what POST /vouchers accepts.
        "VoucherKindEnum": "apps.finance.models.Voucher.Kind",
    }
}
