"""Handover: the Django project package and the handover app."""

from __future__ import annotations

from handover.celery import app as celery_app

__all__ = ["celery_app"]
