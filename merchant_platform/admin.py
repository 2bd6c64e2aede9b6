"""Django admin bases every service shares."""

from django.contrib import admin


class ServiceBackedAdmin(admin.ModelAdmin):
    """No add or edit form: changes are admin actions that call the service functions, so the admin
    follows the same rules (events, audit, caches) as the API; deletes are soft."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_deleted_objects(self, objs, request):
        """A soft delete marks the selected records only: related rows (audit trails, seats) stay,
        so Django's cascade preview and its permission checks on related models do not apply."""
        objs = list(objs)
        return [str(obj) for obj in objs], {self.model._meta.verbose_name_plural: len(objs)}, set(), []
