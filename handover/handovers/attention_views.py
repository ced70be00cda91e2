"""The "needs attention" page: failed runs with no handover, unowned handovers, long-unresolved runs,
repeatedly failing jobs and unmatched alerts — each with its owner, oldest first."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from handover.handovers.attention import SECTION_TITLES, attention_sections


@login_required
def attention_view(request: HttpRequest) -> HttpResponse:
    """What nobody has picked up yet, by section, oldest first (only what the viewer may see)."""
    sections = attention_sections(user=request.user, now=timezone.now())
    return render(
        request,
        "handover/handovers/attention.html",
        {
            "sections": [(key, SECTION_TITLES[key], items) for key, items in sections.items()],
            "age_hours": settings.HANDOVER_UNRESOLVED_AGE_SECONDS // 3600,
            "failures": settings.HANDOVER_REPEATED_FAILURES,
            "failures_of": settings.HANDOVER_REPEATED_FAILURES_OF,
        },
    )
