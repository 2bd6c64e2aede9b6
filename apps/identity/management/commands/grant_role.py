"""`manage.py grant_role`: give an account a role (bootstrap the first SUPER_ADMIN)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.identity import identifiers, selectors
from merchant_platform.policy import ANY, ROLES, policy_grant_role


class Command(BaseCommand):
    help = "Give the account with this identifier (email, phone or username) a role, everywhere or in one merchant."

    def add_arguments(self, parser):
        parser.add_argument("identifier")
        parser.add_argument("role", choices=ROLES)
        parser.add_argument("--domain", default=ANY, help='a merchant id, or "*" (default) for everywhere')

    def handle(self, *args, identifier, role, domain, **options):
        try:
            parsed = identifiers.parse_identifier(identifier)
        except identifiers.InvalidIdentifier as exc:
            raise CommandError(str(exc)) from None
        user = selectors.user_by_identifier(parsed.kind, parsed.value)
        if user is None:
            raise CommandError(f"no account has the {parsed.kind} {parsed.value}")
        policy_grant_role(user_id=user.pk, role=role, domain=domain, source="")
        self.stdout.write(f"user {user.pk} holds {role} in {domain}")
