"""The "needs attention" page: failed runs with no handover, unowned handovers, long-unresolved runs,
repeatedly failing jobs and unmatched alerts — each with its owner, oldest first."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from handover.core.polling import list_page
from handover.handovers.attention import SECTION_TITLES, attention_sections, attention_state


@login_required
def attention_view(request: HttpRequest) -> HttpResponse:
    """What nobody has picked up yet, by section, oldest first (only what the viewer may see).

    Polled by htmx every 30 seconds: the sections' fragment, or 304 while unchanged (``handover.core.polling``).
    """
    now = timezone.now()

    def context() -> dict[str, object]:
        sections = attention_sections(user=request.user, now=now)
        return {
            "sections": [(key, SECTION_TITLES[key], items) for key, items in sections.items()],
            "age_seconds": settings.HANDOVER_UNRESOLVED_AGE_SECONDS,
            "failures": settings.HANDOVER_REPEATED_FAILURES,
            "failures_of": settings.HANDOVER_REPEATED_FAILURES_OF,
        }

    return list_page(
        request,
        template="handover/handovers/attention.html",
        fragment="handover/handovers/_attention_sections.html",
        context=context,
        state=lambda: attention_state(user=request.user, now=now),
    )
