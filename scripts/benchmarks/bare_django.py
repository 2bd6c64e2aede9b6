"""Settings of a bare Django project (DJANGO_SETTINGS_MODULE=benchmarks.bare_django): no
middleware, no database. Its views are in bare_django_app.py. Served only by the bench.
"""

SECRET_KEY = "bench-only-bare-django"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "benchmarks.bare_django_app"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"]
MIDDLEWARE: list[str] = []
DATABASES: dict = {}
USE_TZ = True
REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
}
