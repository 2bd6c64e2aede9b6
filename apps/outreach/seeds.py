"""Seeds of the outreach service (idempotent, re-run by RUN_MODE=migrate): the baseline permissions
of the roles on outreach's resources. A merchant's OWNER handles the inquiries about that merchant
(read, mark spam, delete); an EMPLOYEE reads them; CASHIER gets nothing. Subscribers are a
platform-wide list, left to ADMIN and SUPER_ADMIN."""

from merchant_platform.policy import policy_seed_role_permissions

BASELINE = {
    "OWNER": ["outreach.Inquiry.read", "outreach.Inquiry.update", "outreach.Inquiry.delete"],
    "EMPLOYEE": ["outreach.Inquiry.read"],
    "CASHIER": [],
}


def run() -> dict[str, int]:
    return policy_seed_role_permissions(source="outreach", baseline=BASELINE)
