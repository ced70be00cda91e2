"""Problem exports: one problem as Markdown (for a ticket), a list of problems as CSV (for a spreadsheet).

Both show only what the viewer may see (``problem_view`` / ``problem_summaries``); times are UTC.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from django.template.loader import render_to_string

from handover.problems.models import Problem
from handover.problems.selectors import ProblemView

CSV_COLUMNS = (
    "id",
    "title",
    "status",
    "owning_team",
    "defect_ref",
    "clean_runs_required",
    "fix_deployed_at",
    "verified_at",
    "closed_at",
    "created_at",
    "created_by",
    "handovers_visible",
    "runs_visible",
)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """A CSV cell that a spreadsheet will not run as a formula: text starting with ``= + - @`` (or a tab/CR)
    gets a leading apostrophe (OWASP "CSV injection"). Datetimes are ISO 8601 UTC; None is empty."""
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def problem_markdown(*, view: ProblemView) -> str:
    """``view``'s problem as Markdown: fields, clean-run figures per target, linked handovers and runs,
    history. Text values are escaped (no links, HTML or table cells from typed text). No queries."""
    return render_to_string("handover/problems/export.md", {"view": view, "problem": view.problem}).strip() + "\n"


def problem_list_csv(*, problems: Iterable[Problem], summaries: dict[int, dict[str, Any]]) -> str:
    """The problems as CSV with a header row (``CSV_COLUMNS``); counts are what the viewer may see."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for problem in problems:
        counts = summaries.get(problem.pk, {"handovers": 0, "runs": 0})
        row = (
            problem.public_id,
            problem.title,
            problem.status,
            problem.owning_team.name if problem.owning_team else "",
            problem.defect_ref,
            problem.clean_runs_required,
            problem.fix_deployed_at,
            problem.verified_at,
            problem.closed_at,
            problem.created_at,
            problem.created_by.get_username(),
            counts["handovers"],
            counts["runs"],
        )
        writer.writerow([csv_cell(value) for value in row])
    return out.getvalue()
