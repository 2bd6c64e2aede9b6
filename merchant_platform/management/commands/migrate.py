"""`migrate` over every alias of this process.

Without --database it migrates `default` and then each active service's alias (creating the
service's schemas first); with --database it behaves as Django's own command, which is what the test
runner calls.
"""

from django.core.management import call_command
from django.core.management.commands.migrate import Command as DjangoMigrateCommand

from merchant_platform.db import ensure_schemas
from merchant_platform.registry import active_services


class Command(DjangoMigrateCommand):
    help = "Migrate `default` and every service alias of this process (or one alias with --database)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.set_defaults(database=None)

    def get_check_kwargs(self, options):
        kwargs = super().get_check_kwargs({**options, "database": options["database"] or "default"})
        if options["database"] is None:
            kwargs["databases"] = ["default", *(service.db_alias for service in active_services())]
        return kwargs

    def handle(self, *args, **options):
        if options["database"] is not None:
            return super().handle(*args, **options)
        passthrough = {
            k: v
            for k, v in options.items()
            if k in ("verbosity", "interactive", "run_syncdb", "fake", "fake_initial", "plan", "check_unapplied", "prune")
        }
        app_label = options.get("app_label")
        migration_name = options.get("migration_name")
        positional = [a for a in (app_label, migration_name) if a]
        if not app_label:
            call_command(DjangoMigrateCommand(), *positional, database="default", **passthrough)
        for service in active_services():
            if app_label and app_label != service.app_label:
                continue
            ensure_schemas(service.db_alias, service.schemas)
            if options["verbosity"]:
                self.stdout.write(f"Migrating service {service.name} (alias {service.db_alias}, schema {service.schema})")
            call_command(DjangoMigrateCommand(), *positional, database=service.db_alias, **passthrough)
