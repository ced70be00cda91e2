"""A source's page (admins): the built-in adapter's guide, its integrations, refused requests and recent deliveries.

A *source* is an ingestion address ``/api/v1/alerts/<source>/`` served by one adapter
(``runs.alerts.parsers.registry``). Its page gathers what an admin connecting a sender needs in one
place: the setup guide (docs/integrations/<source>.md, summarised here), whether its senders can sign,
the conventions the adapter reads by default (each integration edits its own on its page), the
integrations posting to it, every refusal at its address (capped hourly counters,
``runs.alerts.refusals``), and the newest deliveries of all its integrations with what became of
their alerts. Reads only; staff only (integrations are site configuration).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import Count, Q, QuerySet

from handover.core.people import Person
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.custom.parser import SOURCE as CUSTOM_SOURCE
from runs.alerts.parsers.registry import available_sources, get_adapter
from runs.alerts.refusals import REFUSED_KEEP_DAYS, RefusedSummaryRow, refused_request_summary
from runs.alerts.selectors import integration_list
from runs.catalog.conventions import integration_conventions
from runs.catalog.keys import source_can_sign
from runs.catalog.models import Integration

User = Person | AnonymousUser
RECENT_DELIVERIES = 25
SUMMARY_MAX_CHARS = 600


@dataclass(frozen=True)
class SourceGuide:
    """A source's setup guide: ``path`` in the repository, its ``title`` and first paragraph (``summary``).

    ``title`` and ``summary`` are empty when the file is not there (a deployment without ``docs/``);
    the summary then falls back to the first line of the adapter's docstring.
    """

    path: str
    title: str
    summary: str


@dataclass(frozen=True)
class SourceOverview:
    """Everything the source page and ``GET /api/v1/sources/<source>/`` show.

    ``default_conventions``: the adapter's defaults that an integration may edit (empty for
    ``custom``: each custom integration's mapping says). ``integrations``: annotated with
    ``key_count`` and ``delivery_count``. ``refused``: refusals at the address, last
    ``refused_keep_days`` days, by reason and network (UTC times). ``deliveries``: the newest of all
    its integrations, annotated with ``alert_count`` and one count per alert outcome.
    """

    source: str
    can_sign: bool
    guide: SourceGuide
    default_conventions: dict[str, Any]
    integrations: list[Integration]
    refused: list[RefusedSummaryRow]
    refused_total: int
    refused_keep_days: int
    deliveries: list[Delivery]

    @property
    def endpoint(self) -> str:
        """The address senders post to, e.g. ``/api/v1/alerts/alertmanager/``."""
        return f"/api/v1/alerts/{self.source}/"


def source_guide(source: str) -> SourceGuide:
    """The guide of ``source``: docs/integrations/<source>.md (custom: docs/custom-integrations.md).

    Reads the file's ``# title`` and the first paragraph before its first section; no I/O beyond the
    one file. Never raises for a missing or unreadable file.
    """
    relative = "docs/custom-integrations.md" if source == CUSTOM_SOURCE else f"docs/integrations/{source}.md"
    title, summary = "", ""
    try:
        lines = (Path(settings.BASE_DIR) / relative).read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    paragraph: list[str] = []
    for line in lines:
        if line.startswith("# ") and not title:
            title = line[2:].strip()
        elif line.startswith("#"):
            break  # the first section: the summary is what came before it
        elif line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            break
    summary = " ".join(paragraph)
    if not summary:
        doc = (getattr(get_adapter(source), "__doc__", None) or "").strip()
        summary = doc.splitlines()[0] if doc else ""
    if len(summary) > SUMMARY_MAX_CHARS:
        summary = summary[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"
    return SourceGuide(path=relative, title=title, summary=summary)


def source_default_conventions(source: str) -> dict[str, Any]:
    """The adapter's default conventions (text, list of texts or empty), as an integration edits them.

    Those of an integration with no settings of its own (``integration_conventions``); empty for
    ``custom`` (each custom integration's mapping says where it reads each field).
    """
    if source == CUSTOM_SOURCE:
        return {}
    return integration_conventions(integration=Integration(source=source, settings={}))


def source_deliveries_recent(*, source: str, limit: int = RECENT_DELIVERIES) -> QuerySet[Delivery]:
    """The newest deliveries to ``source``'s integrations, with the integration and per-outcome alert counts."""
    outcome_counts = {
        f"{outcome}_count": Count("alerts", filter=Q(alerts__outcome=outcome))
        for outcome in (
            Alert.Outcome.ACCEPTED,
            Alert.Outcome.DUPLICATE,
            Alert.Outcome.UNMATCHED,
            Alert.Outcome.REJECTED,
        )
    }
    return (
        Delivery.objects.filter(integration__source=source)
        .select_related("integration")
        .annotate(alert_count=Count("alerts"), **outcome_counts)
        .order_by("-received_at", "-id")[:limit]
    )


def source_list(*, user: User) -> list[str]:
    """The source slugs ``user`` may look at: every available adapter for admins (staff), none otherwise."""
    if not (user.is_authenticated and getattr(user, "is_staff", False)):
        return []
    return available_sources()


def source_overview(*, user: User, source: str) -> SourceOverview | None:
    """``source``'s overview for ``user``; None when there is no such source or ``user`` is not an admin.

    Queries: the integrations, the refusals, the deliveries (three).
    """
    if source not in source_list(user=user):
        return None
    refused = refused_request_summary(source=source)
    return SourceOverview(
        source=source,
        can_sign=source_can_sign(source),
        guide=source_guide(source),
        default_conventions=source_default_conventions(source),
        integrations=list(integration_list(user=user).filter(source=source)),
        refused=refused,
        refused_total=sum(row.count for row in refused),
        refused_keep_days=REFUSED_KEEP_DAYS,
        deliveries=list(source_deliveries_recent(source=source)),
    )


def source_integration_counts(*, user: User) -> dict[str, int]:
    """How many integrations each source has (for the list of sources); admins only, else empty."""
    if not (user.is_authenticated and getattr(user, "is_staff", False)):
        return {}
    rows = Integration.objects.values("source").annotate(n=Count("id")).order_by()
    return {row["source"]: row["n"] for row in rows}
