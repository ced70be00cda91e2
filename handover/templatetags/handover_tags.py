"""Display helpers: times in the viewer's zone with UTC on hover, zones, durations, status badges."""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from handover.core import durations, once
from handover.core.pagination import capped_label
from handover.core.time_format import window_parts
from runs.attempts.business_state import business_reason_words, run_business_state
from runs.attempts.models import Attempt

register = template.Library()

# Every status (and outcome, decision) value of every stateful model has an icon here, shown beside
# the word, so a badge never relies on its colour (tests/handover/test_templatetags.py walks the models).
STATUS_ICONS = {
    # runs and attempts
    "expected": "…",
    "queued": "…",
    "running": "▶",
    "succeeded": "✔",
    "failed": "✖",
    "timed_out": "⏱",
    "missed": "⚠",
    "unknown": "?",
    "abandoned": "–",
    # deliveries and alerts
    "received": "↓",
    "processed": "✔",
    "pending": "…",
    "accepted": "✔",
    "duplicate": "≡",
    "unmatched": "⚠",
    "rejected": "✖",
    "ignored": "–",
    # next-run checks
    "scheduled": "◷",
    "passed": "✔",
    "waived": "⚑",
    # work items (ledger outcomes, runner statuses) and ledger loads
    "unverified": "◌",
    "completed": "✔",
    "absent": "∅",
    "uncertain": "≈",
    "skipped": "↷",
    "attempted": "↗",
    "committed": "✔",
    "awaiting_confirmation": "✋",
    "discarded": "⊘",
    # handovers and their notifications
    "draft": "✎",
    "handed_over": "➜",
    "recovering": "⟳",
    "verifying": "…",
    "resolved": "✔",
    "closed": "■",
    "sent": "✔",
    "paused": "⏸",
    # replay requests, approvals, dispatches and webhook deliveries
    "approved": "✔",
    "dispatched": "⇢",
    "cancelled": "⊘",
    "expired": "⌛",
    "approve": "✔",
    "reject": "✖",
    "leased": "⧖",
    "started": "▶",
    "sending": "…",
    # a run's business state
    "ok": "✔",
    "attention": "⚠",
    # notification deliveries
    "held": "⧗",
    "undeliverable": "⊘",
    # problems (docs/problems.md); "closed" is the handover's icon
    "open": "○",
    "fix_in_progress": "⚒",
    "fix_deployed": "⇪",
    "verified": "✔",
}


@register.filter
def when(value: datetime | None, zone_name: str | None = None) -> str:
    """``<time>`` in the viewer's zone (or ``zone_name``) carrying the UTC ISO value; "—" for None.

    To the second, cut (not rounded) like the export's ``utc``: a stored time often has microseconds
    (``timezone.now()``), which say nothing to a person and would make one table's times uneven.
    """
    if value is None:
        return mark_safe('<span class="muted">—</span>')
    value = value.replace(microsecond=0)
    zone = zoneinfo.ZoneInfo(zone_name) if zone_name else timezone.get_current_timezone()
    local = value.astimezone(zone)
    utc = value.astimezone(zoneinfo.ZoneInfo("UTC"))
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        utc.isoformat(),
        f"{utc:%Y-%m-%d %H:%M:%S}",
        f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}",
    )


@register.simple_tag
def window(start: datetime | None, end: datetime | None, zone_name: str | None = None) -> str:
    """A processing window ``[start, end)`` in ``zone_name`` (the job's zone), labelled with the zone, UTC on hover.

    The one way pages write a window: ``2026-11-28 02:00–03:00 CET`` within a day,
    ``2026-11-28 00:00 – 2026-11-29 00:00 CET`` across days, and each edge with its own abbreviation
    when the window crosses a DST change (``2026-10-25 00:00 CEST – 2026-10-26 00:00 CET``). Each edge is a
    ``<time>`` carrying its UTC ISO value; the ``title`` gives both edges in UTC. "—" when an edge is None.
    """
    if start is None or end is None:
        return mark_safe('<span class="muted">—</span>')
    zone = zone_name or timezone.get_current_timezone_name()
    first_text, joint, last_text, label = window_parts(start, end, zone)
    utc_zone = zoneinfo.ZoneInfo("UTC")
    first_utc, last_utc = (
        start.replace(microsecond=0).astimezone(utc_zone),
        end.replace(microsecond=0).astimezone(utc_zone),
    )
    return format_html(
        '<span class="window" title="{} – {} UTC">'
        '<time datetime="{}">{}</time>{}<time datetime="{}">{}</time> {}</span>',
        f"{first_utc:%Y-%m-%d %H:%M:%S}",
        f"{last_utc:%Y-%m-%d %H:%M:%S}",
        first_utc.isoformat(),
        first_text,
        joint,
        last_utc.isoformat(),
        last_text,
        label,
    )


@register.filter
def capped(value: int) -> str:
    """A count from a capped count (``LIST_COUNT_CAP + 1`` at most): ``"1234"``, or ``"10,000+"`` past the cap."""
    return capped_label(int(value))


@register.filter
def seconds_in_words(value: int | float | timedelta | None) -> str:
    """A length of time in words (``handover.core.durations.seconds_in_words``): 1800 -> "30 minutes"."""
    return durations.seconds_in_words(value)


@register.filter
def duration(start: datetime | None, end: datetime | None) -> str:
    """The time between two instants in words (``seconds_in_words``: "12 minutes 3 seconds").

    Empty when either instant is missing.
    """
    if start is None or end is None:
        return ""
    return seconds_in_words(int((end - start) / timedelta(seconds=1)))


@register.simple_tag
def poll_stamp() -> str:
    """ "updated HH:MM:SS" (the viewer's zone, UTC on hover) under a list that polls: when it was rendered."""
    now = timezone.now().replace(microsecond=0)
    local = timezone.localtime(now)
    return format_html(
        '<p class="small muted poll-stamp">updated <time datetime="{}" title="{} UTC">{} {}</time></p>',
        now.astimezone(zoneinfo.ZoneInfo("UTC")).isoformat(),
        f"{now.astimezone(zoneinfo.ZoneInfo('UTC')):%Y-%m-%d %H:%M:%S}",
        f"{local:%H:%M:%S}",
        local.tzname(),
    )


@register.filter
def status_words(value: str | None) -> str:
    """A status value in words with its icon, not as a badge ("timed_out" -> "⏱ timed out"): for a
    secondary technical status beside a business state, which stays the badge people see first."""
    if not value:
        return ""
    return f"{STATUS_ICONS.get(value, '•')} {value.replace('_', ' ')}"


@register.filter
def trigger_words(value: str | None) -> str:
    """An attempt's trigger value in words ("manual_replay" -> "Manual replay"); empty for None."""
    if not value:
        return ""
    return str(Attempt.Trigger(value).label) if value in Attempt.Trigger.values else value.replace("_", " ")


@register.simple_tag
def badge(status: str, label: str = "") -> str:
    """A status badge: an icon and the word, so it never relies on colour alone."""
    return format_html(
        '<span class="badge badge-{}">{} {}</span>',
        status,
        STATUS_ICONS.get(status, "•"),
        label or status.replace("_", " "),
    )


_BACKTICKS = re.compile(r"`([^`\n]+)`")


@register.filter
def inline_code(value: object) -> SafeString:
    """Text with Markdown's inline code (a key in backticks) shown as ``<code>``; everything else escaped.

    The text is HTML-escaped first, then each backtick pair on one line becomes ``<code>…</code>``, so
    nothing in it can add markup of its own (summaries and reasons come from payloads and people).
    """
    escaped = conditional_escape("" if value is None else str(value))
    return mark_safe(_BACKTICKS.sub(r"<code>\1</code>", escaped))  # noqa: S308 - escaped above; only <code> added


@register.filter
def safe_link(url: str) -> str:
    """Show a link only when it is http(s); otherwise the text, unlinked."""
    if url and url.startswith(("http://", "https://")):
        return format_html('<a href="{}" rel="noopener noreferrer nofollow" target="_blank">{}</a>', url, url)
    return url or ""


@register.filter
def reasons(text: str) -> list[str]:
    """Split an alert's reason (``"; "``-joined, as ingestion writes it) into its separate reasons."""
    return [part.strip() for part in (text or "").split("; ") if part.strip()]


@register.filter
def utc(value: datetime | None) -> str:
    """Plain UTC text for exports (``2026-11-28 01:03:11Z``); "—" for None."""
    if value is None:
        return "—"
    return f"{value.astimezone(zoneinfo.ZoneInfo('UTC')):%Y-%m-%d %H:%M:%S}Z"


# Markdown export (templates/handover/handovers/export.md). Payload and people's text is untrusted: it must not add
# links, images, HTML, code, headings, list items or table cells of its own to a document pasted into a ticket.
_MD_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# Inline syntax, escaped everywhere: code and fences (`` ` ~``), emphasis (``*``), links and images
# (``[ ]``: ``![x](y)`` without its brackets is text), table cells (``|``) and the escape itself.
_MD_INLINE = re.compile(r"([\\`*\[\]|~])")
# ``_`` emphasises only at a word's edge, so ``nightly_invoice`` stays as it is.
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
# Block syntax at the start of a line: headings, setext underlines, rules, bullets, ordered list numbers,
# and a table's delimiter row (``:--``: with a line holding an escaped ``\|`` above it, GFM makes a table).
_MD_LINE_START = re.compile(r"^(\s*)(?:([#=+:-])|(\d+)([.)])(?=\s|$))")
_MD_BULLET = re.compile(r"^(\s*[-+] +)(\S.*)$")


def _markdown_line(line: str, *, keep_bullet: bool) -> str:
    bullet = _MD_BULLET.match(line) if keep_bullet else None
    if bullet:  # a person's "- " list stays a list; what follows the marker is escaped like a line
        return bullet.group(1) + _markdown_line(bullet.group(2), keep_bullet=False)
    return _MD_LINE_START.sub(
        lambda m: m.group(1) + ("\\" + m.group(2) if m.group(2) else f"{m.group(3)}\\{m.group(4)}"), line, count=1
    )


@register.filter
def markdown_escape(value: object, mode: str = "") -> SafeString:
    """Untrusted text as inert Markdown: it reads the same, but adds no syntax of its own.

    HTML's ``<>&`` become entities; Markdown's inline characters are backslash-escaped, so
    ``[x](javascript:…)`` and ``![img](…)`` are text, not a link or an image; a line that starts like
    a heading, a rule or a numbered item is escaped. ``mode``: ``""`` for a block of text (line breaks
    kept, a ``- `` bullet stays a bullet), ``"inline"`` for a list item or a table cell (line breaks
    fold into spaces, so the text cannot end the item or the row). None is "".
    """
    text = "" if value is None else str(value)
    inline = mode == "inline"
    text = " ".join(text.split()) if inline else text.replace("\r\n", "\n").replace("\r", "\n")
    text = _MD_UNDERSCORE.sub(r"\\_", _MD_INLINE.sub(r"\\\1", text.translate(_MD_HTML)))
    lines = (_markdown_line(line, keep_bullet=not inline) for line in text.split("\n"))
    return mark_safe("\n".join(lines))  # noqa: S308 - every character with a meaning was escaped above


@register.filter
def markdown_code(value: object, mode: str = "") -> SafeString:
    """Untrusted text as one Markdown code span (an execution id, a job key), on one line.

    A code span shows its content literally (no HTML, no links), so only the fence needs care: one
    backtick longer than the longest run of backticks inside. ``mode`` ``"cell"`` (a table cell):
    GFM splits cells on ``|`` even inside code, so such text is escaped as text instead.
    """
    text = " ".join(("" if value is None else str(value)).split())
    if mode == "cell" and "|" in text:
        return markdown_escape(text, "inline")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return mark_safe(f"{fence}{pad}{text}{pad}{fence}")  # noqa: S308 - a code span shows its content literally


@register.simple_tag
def business_badge(run: Any) -> str:
    """A run's business state as a badge with its reasons in words, the technical status beside it.

    Reads the annotations ``run_business_state_annotate`` added (the selectors of every page that
    shows runs add them), so it runs no query for an annotated run.
    """
    state = run_business_state(run)
    words = "; ".join(business_reason_words(r) for r in state.reasons)
    return format_html(
        '<span class="business-state" title="{}">{}{}</span> <span class="muted small">technical: {}</span>',
        words,
        badge(state.state, "attention" if state.state == "attention" else ""),
        format_html(' <span class="small business-reasons">{}</span>', words) if words else "",
        run.status,
    )


@register.simple_tag
def submission_field() -> SafeString:
    """A create form's one-off hidden ``submission`` token (``handover.core.once``): sent twice, the form
    creates once."""
    return format_html('<input type="hidden" name="{}" value="{}">', once.FIELD, once.submission_token())
