"""The approvals app's Celery tasks live in its slice; autodiscovery imports this module, which imports them."""

from __future__ import annotations

from approvals.replays import tasks as replay_tasks

__all__ = ["replay_tasks"]
