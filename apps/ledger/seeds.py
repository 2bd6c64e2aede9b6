"""Seeds of the ledger service (idempotent, re-run by RUN_MODE=migrate): the baseline permissions
of the roles on ledger jobs. A merchant's OWNER orders, reads, downloads, retries and regenerates
its documents; an EMPLOYEE reads and downloads them; CASHIER gets nothing."""

from merchant_platform.policy import policy_seed_role_permissions

BASELINE = {
    "OWNER": ["ledger.LedgerJob.read", "ledger.LedgerJob.create"],
    "EMPLOYEE": ["ledger.LedgerJob.read"],
    "CASHIER": [],
}


def run() -> dict[str, int]:
    return policy_seed_role_permissions(source="ledger", baseline=BASELINE)
