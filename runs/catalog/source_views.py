"""Sources (admins): each ingestion address's page — its guide, integrations, refusals and recent deliveries."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from runs.alerts.refusals import refused_request_summary_by_source
from runs.catalog.sources import source_guide, source_integration_counts, source_list, source_overview


@staff_member_required
def source_list_view(request: HttpRequest) -> HttpResponse:
    """Admins: every source with its guide's title, integration count and refusals of the last 30 days."""
    counts = source_integration_counts(user=request.user)
    refused = {row.source: row for row in refused_request_summary_by_source()}
    rows = [
        {
            "source": source,
            "guide": source_guide(source),
            "integration_count": counts.get(source, 0),
            "refused": refused.get(source),
        }
        for source in source_list(user=request.user)
    ]
    return render(request, "runs/catalog/source_list.html", {"sources": rows})


@staff_member_required
def source_detail_view(request: HttpRequest, source: str) -> HttpResponse:
    """Admins: one source's page (``runs.catalog.sources.source_overview``); 404 for an unknown source."""
    overview = source_overview(user=request.user, source=source)
    if overview is None:
        raise Http404("No such source.")
    conventions = [
        (key, ", ".join(value) if isinstance(value, list) else (value or ""))
        for key, value in overview.default_conventions.items()
    ]
    return render(request, "runs/catalog/source_detail.html", {"o": overview, "conventions": conventions})
