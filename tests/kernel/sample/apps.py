from django.apps import AppConfig


class KernelSampleConfig(AppConfig):
    """A test-only app: records built on the kernel's BaseModel, routed to a service alias."""

    name = "tests.kernel.sample"
    label = "kernel_sample"
    default_auto_field = "django.db.models.BigAutoField"
