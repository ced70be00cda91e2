"""The Celery app. Tasks live in their slice's ``tasks.py`` and are named ``<app>.<task>``; each app's
``tasks.py`` imports them so that autodiscovery registers them."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handover.settings")

app = Celery("handover")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
