"""What the handover page, the print view and the Markdown export show, in one order.

The order is for reading at 3 a.m.: what to do next first, then the facts, the unknowns, impact
and deadlines, then the background.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.template.loader import render_to_string

from handover.handovers.closing import ClosingCondition
from handover.handovers.models import Handover

S = Handover.Section
READING_ORDER = (
    S.NEXT_ACTION,
    S.DEFINITELY_HAPPENED,
    S.MAY_HAVE_HAPPENED,
    S.BUSINESS_IMPACT,
    S.DEADLINES,
    S.AFFECTED,
    S.EXPECTED_OUTPUT,
    S.RECENT_CHANGES,
)


@dataclass(frozen=True)
class SectionView:
    """One section as shown: its name, title, text, and whether the text is still generated."""

    key: str
    title: str
    text: str
    is_generated: bool


def handover_sections(handover: Handover) -> list[SectionView]:
    """The handover's sections in reading order (no queries)."""
    titles = dict(Handover.Section.choices)
    return [
        SectionView(
            key=key,
            title=titles[key],
            text=getattr(handover, key),
            is_generated=handover.section_is_generated(key),
        )
        for key in READING_ORDER
    ]


def handover_markdown(*, handover: Handover, conditions: list[ClosingCondition]) -> str:
    """The handover as Markdown for pasting into a ticket (``handover_get`` must have loaded it).

    Generated text is marked as such; times are UTC. No queries beyond what was prefetched.
    """
    return (
        render_to_string(
            "handover/handovers/export.md",
            {
                "handover": handover,
                "sections": handover_sections(handover),
                "links": list(handover.links.all()),
                "exceptions": list(handover.residual_exceptions.all()),
                "conditions": conditions,
            },
        ).strip()
        + "\n"
    )
