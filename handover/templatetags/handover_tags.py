"""Display helpers: times in the viewer's zone with UTC on hover, zones, durations, status badges."""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

register = template.Library()

STATUS_ICONS = {
    "succeeded": "✔",
    "accepted": "✔",
    "passed": "✔",
    "failed": "✖",
    "timed_out": "⏱",
    "rejected": "✖",
    "running": "▶",
    "queued": "…",
    "pending": "…",
    "expected": "…",
    "missed": "⚠",
    "unmatched": "⚠",
    "unknown": "?",
    "duplicate": "≡",
    "ignored": "–",
    "abandoned": "–",
    # handover statuses
    "draft": "✎",
    "handed_over": "➜",
    "recovering": "⟳",
    "verifying": "…",
    "resolved": "✔",
    "closed": "■",
    "paused": "⏸",
}


@register.filter
def when(value: datetime | None, zone_name: str | None = None) -> str:
    """``<time>`` in the viewer's zone (or ``zone_name``) carrying the UTC ISO value; "—" for None."""
    if value is None:
        return mark_safe('<span class="muted">—</span>')
    zone = zoneinfo.ZoneInfo(zone_name) if zone_name else timezone.get_current_timezone()
    local = value.astimezone(zone)
    utc = value.astimezone(zoneinfo.ZoneInfo("UTC"))
    micro = f".{local.microsecond:06d}".rstrip("0") if local.microsecond else ""
    text = f"{local:%Y-%m-%d %H:%M:%S}{micro} {local.tzname()}"
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>', utc.isoformat(), f"{utc:%Y-%m-%d %H:%M:%S}", text
    )


@register.filter
def duration(start: datetime | None, end: datetime | None) -> str:
    """Human duration between two instants ("12 min 3 s"); empty when either is missing."""
    if start is None or end is None:
        return ""
    seconds = int((end - start) / timedelta(seconds=1))
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours} h"] if hours else []
    if minutes:
        parts.append(f"{minutes} min")
    if secs or not parts:
        parts.append(f"{secs} s")
    return ("-" if seconds < 0 else "") + " ".join(parts)


@register.simple_tag
def badge(status: str, label: str = "") -> str:
    """A status badge: an icon and the word, so it never relies on colour alone."""
    return format_html(
        '<span class="badge badge-{}">{} {}</span>',
        status,
        STATUS_ICONS.get(status, "•"),
        label or status.replace("_", " "),
    )


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
