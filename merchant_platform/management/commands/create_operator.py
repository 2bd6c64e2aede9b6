"""Create or update the Django admin operator account (idempotent)."""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Create (or update the password of) an operator account for /admin/. Password from --password-env."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="operator")
        parser.add_argument("--email", default="")
        parser.add_argument("--password-env", default="OPERATOR_PASSWORD", help="environment variable holding the password")

    def handle(self, *args, username, email, password_env, **options):
        password = os.environ.get(password_env, "")
        if len(password) < 12:
            raise CommandError(f"set {password_env} to a password of at least 12 characters")
        user, created = get_user_model().objects.get_or_create(username=username, defaults={"email": email})
        user.email = email or user.email
        user.is_staff = user.is_superuser = user.is_active = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"operator {username} {'created' if created else 'updated'}")
