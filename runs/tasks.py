"""The runs app's Celery tasks live in its slices; Celery's autodiscovery imports this module, which imports them."""

from __future__ import annotations

from runs.alerts import tasks as alert_tasks
from runs.audit import tasks as audit_tasks
from runs.checks import tasks as check_tasks
from runs.ledger import tasks as ledger_tasks

__all__ = ["alert_tasks", "audit_tasks", "check_tasks", "ledger_tasks"]
