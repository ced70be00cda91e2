"""The handover app's Celery tasks live in its slice; Celery's autodiscovery imports this module, which imports them."""

from __future__ import annotations

from handover.handovers import tasks as handover_tasks
from handover.notifications import tasks as notification_tasks
from handover.ownership import tasks as ownership_tasks
from handover.problems import tasks as problem_tasks

__all__ = ["handover_tasks", "notification_tasks", "ownership_tasks", "problem_tasks"]
