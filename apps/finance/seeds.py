"""Finance's seeds: the baseline permissions of OWNER, EMPLOYEE and CASHIER on finance's resources
(spec 1.2.2, idempotent: `manage.py seed` and RUN_MODE=migrate re-run it)."""

from merchant_platform.policy import policy_seed_role_permissions

ACCOUNT = "finance.Account"
VOUCHER = "finance.Voucher"
LINE = "finance.Transaction"

BASELINE = {
    # OWNER keeps the books of the merchants it belongs to: accounts, vouchers, voids, reports.
    "OWNER": [f"{ACCOUNT}.*", f"{VOUCHER}.*", f"{LINE}.*"],
    # Staff read the books and post; voids and the chart stay with the owner and admins.
    "EMPLOYEE": [f"{ACCOUNT}.read", f"{VOUCHER}.read", f"{VOUCHER}.create", f"{LINE}.read"],
    "CASHIER": [f"{ACCOUNT}.read", f"{VOUCHER}.read", f"{LINE}.read"],
}


def run() -> None:
    policy_seed_role_permissions(source="finance", baseline=BASELINE)
