"""Celery tasks of ledger (queue `ledger`, the worker role): one generation run per task, acknowledged
late (a killed worker's run is delivered again and resumes, or is left to the sweep), and the
recovery sweep, at worker start and every APP_ENV_SWEEP_INTERVAL_MS."""

from __future__ import annotations

from celery import shared_task, signals
from django.conf import settings

from apps.ledger import services


@shared_task(name="apps.ledger.tasks.generate_ledger", ignore_result=True)
def generate_ledger(ledger_id: int, run_id: str) -> bool:
    return services.job_run(ledger_id=int(ledger_id), run_id=run_id)


@shared_task(name="apps.ledger.tasks.sweep_stalled_jobs", ignore_result=True)
def sweep_stalled_jobs() -> int:
    return services.job_sweep()


if "worker" in settings.APP_ENV_APPLICATION_ROLES:
    from merchant_platform.celery import register_periodic_task

    register_periodic_task(
        "apps.ledger.tasks.sweep_stalled_jobs", task=sweep_stalled_jobs.name, schedule=settings.APP_ENV_SWEEP_INTERVAL_MS / 1000
    )

    @signals.worker_ready.connect
    def _sweep_at_start(**_):
        sweep_stalled_jobs.delay()
