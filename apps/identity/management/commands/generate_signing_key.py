"""`manage.py generate_signing_key`: a new ES256 signing key for identity (rotation included)."""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.identity import keys


class Command(BaseCommand):
    help = (
        "Write a new EC P-256 private key as <activation time>.pem into the key directory "
        "(IDENTITY_SIGNING_KEY_PATH). With --activate-in the key is published in /jw-certs at once "
        "and signs from then on; the previous key keeps verifying until its tokens have expired."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dir", dest="directory", type=Path, default=None, help="key directory (default: IDENTITY_SIGNING_KEY_PATH)")
        parser.add_argument("--activate-in", type=int, default=0, metavar="SECONDS", help="start signing after this delay (default 0)")
        parser.add_argument("--if-missing", action="store_true", help="do nothing when the directory holds a key already (dev, tests)")

    def handle(self, *args, directory=None, activate_in=0, if_missing=False, **options):
        directory = directory or Path(settings.IDENTITY_SIGNING_KEY_PATH)
        if directory.is_file():
            raise CommandError(f"{directory} is a single key file; point --dir (or IDENTITY_SIGNING_KEY_PATH) at a directory to rotate")
        if activate_in < 0:
            raise CommandError("--activate-in cannot be negative")
        if if_missing:
            path = keys.ensure_key(directory)
            self.stdout.write(f"signing key {'written to ' + str(path) if path else 'already present in ' + str(directory)}")
            return
        try:
            path = keys.write_new_key(directory, activates_at=time.time() + activate_in)
        except FileExistsError as exc:
            raise CommandError(str(exc)) from None
        kid = next(key.kid for key in keys.KeyRing(directory).keys if key.path == path)
        self.stdout.write(f"signing key {kid} written to {path}")
