"""Setting a job's replay webhook: an admin's act; the HMAC secret is shown once."""

from __future__ import annotations

import secrets

from django.db import transaction

from approvals.replays import webhook_client as webhooks
from approvals.replays.models import ReplayWebhook
from handover.core.errors import DomainError
from handover.core.people import Person
from runs.catalog.models import Job


def replay_webhook_set(
    *, job: Job, url: str, actor: Person | None = None, rotate_secret: bool = False
) -> tuple[ReplayWebhook, str]:
    """Set (or change) the webhook approved replays of ``job`` are posted to; returns the row and its secret.

    ``url`` must be http(s) (https in production), without credentials, and not a loopback,
    private or link-local address unless its host is allow-listed (checked again, with DNS, at
    every delivery). A new webhook, or ``rotate_secret``, gets a new secret; otherwise the secret
    stays. The secret (hex) is derived, never stored: show it once to the runner's operator.
    Raises DomainError (400) for a URL that is not allowed.
    """
    url = (url or "").strip()
    problem = webhooks.url_problem(url)
    if problem:
        raise DomainError(problem, errors={"url": [problem]})
    with transaction.atomic():
        row = ReplayWebhook.objects.select_for_update().filter(job=job).first()
        if row is None:
            row = ReplayWebhook.objects.create(job=job, url=url, secret_salt=secrets.token_hex(16), created_by=actor)
        else:
            row.url = url
            row.is_active = True
            if rotate_secret:
                row.secret_salt = secrets.token_hex(16)
            row.save(update_fields=["url", "is_active", "secret_salt", "updated_at"])
    return row, webhooks.webhook_secret(row.secret_salt)
