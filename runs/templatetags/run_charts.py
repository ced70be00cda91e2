"""Server-rendered charts of the run page: the attempts of a run on a time axis (SVG, no script).

``{% attempts_time_axis run attempts %}`` draws one row per attempt: a hollow diamond at its
scheduled start, a dashed line to its actual start (the delay), and a bar from the actual start to
the end, with the status in words and an icon (never colour alone). Times are in the viewer's zone.

The axis is linear within each burst of activity; a long quiet gap between bursts (the night
between a failure and the morning's replay) is drawn as a break with its length written on it, so
a 90-second retry stays visible next to a replay eight hours later. Colours come from the page's
stylesheet through classes (no inline styles: the CSP allows only our own stylesheet).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from handover.core.durations import seconds_in_words
from runs.attempts.models import Attempt

register = template.Library()

WIDTH = 800
LABEL_WIDTH = 150  # the left column: "#1 Scheduled" and the status in words
RIGHT_PAD = 16
ROW_HEIGHT = 38
TOP = 10
AXIS_HEIGHT = 56
BREAK_WIDTH = 44  # a compressed quiet gap
MIN_BURST_WIDTH = 150
MERGE_GAP = timedelta(minutes=20)  # quieter than this between two attempts: one burst
OPEN_BAR = 18  # px drawn for an attempt that started and has not ended
ICONS = {
    "succeeded": "✔",
    "failed": "✖",
    "timed_out": "⏱",
    "cancelled": "⊘",
    "running": "▶",
    "queued": "…",
    "abandoned": "–",
}
TICK_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
MIN_TICK_PX = 64


@dataclass(frozen=True)
class _Row:
    number: int
    trigger: str
    status: str
    scheduled: datetime | None
    started: datetime | None
    ended: datetime | None

    @property
    def times(self) -> list[datetime]:
        return [t for t in (self.scheduled, self.started, self.ended) if t is not None]


@dataclass
class _Burst:
    """A stretch of time drawn to scale from ``x0`` to ``x1``."""

    start: datetime
    end: datetime
    x0: float = 0.0
    x1: float = 0.0
    first: datetime | None = None  # the first and last reported times in it (start and end are padded)
    last: datetime | None = None

    @property
    def seconds(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0)

    def x(self, when: datetime) -> float:
        if self.seconds == 0:
            return (self.x0 + self.x1) / 2
        return self.x0 + (self.x1 - self.x0) * (when - self.start).total_seconds() / self.seconds


def _rows(run: object, attempts: Iterable[Attempt]) -> list[_Row]:
    rows = []
    scheduled_for = getattr(run, "scheduled_for", None)
    for attempt in sorted(attempts, key=lambda a: a.number):
        scheduled = attempt.scheduled_at
        if scheduled is None and attempt.trigger == "scheduled":
            scheduled = scheduled_for  # a scheduled attempt was meant to start at the run's fire time
        ended = attempt.ended_at
        if ended is None and attempt.status in ("succeeded", "failed", "timed_out", "cancelled"):
            ended = attempt.status_changed_at
        rows.append(
            _Row(
                number=attempt.number,
                trigger=attempt.get_trigger_display(),
                status=attempt.status,
                scheduled=scheduled,
                started=attempt.started_at,
                ended=ended,
            )
        )
    return rows


def _bursts(rows: Sequence[_Row]) -> list[_Burst]:
    """Group the attempts' times into bursts separated by quiet gaps longer than ``MERGE_GAP``."""
    spans = sorted((min(r.times), max(r.times)) for r in rows if r.times)
    bursts: list[_Burst] = []
    for start, end in spans:
        if bursts and start - bursts[-1].end <= MERGE_GAP:
            bursts[-1].end = max(bursts[-1].end, end)
        else:
            bursts.append(_Burst(start=start, end=end))
    for burst in bursts:  # a margin so markers never sit on a break
        burst.first, burst.last = burst.start, burst.end
        pad = max(timedelta(seconds=burst.seconds * 0.06), timedelta(minutes=1))
        burst.start, burst.end = burst.start - pad, burst.end + pad
    return bursts


def _layout(bursts: list[_Burst]) -> None:
    """Give each burst its share of the width: proportional to its length, at least ``MIN_BURST_WIDTH``."""
    left, right = LABEL_WIDTH + 8, WIDTH - RIGHT_PAD
    room = right - left - BREAK_WIDTH * (len(bursts) - 1)
    total = sum(b.seconds for b in bursts) or 1.0
    widths = [max(MIN_BURST_WIDTH, room * b.seconds / total) for b in bursts]
    scale = room / sum(widths)
    x = float(left)
    for burst, width in zip(bursts, widths, strict=True):
        burst.x0, burst.x1 = x, x + width * scale
        x = burst.x1 + BREAK_WIDTH


def _x(bursts: Sequence[_Burst], when: datetime) -> float:
    for burst in bursts:
        if burst.start <= when <= burst.end:
            return burst.x(when)
    return bursts[-1].x1 if when > bursts[-1].end else bursts[0].x0


def _span(seconds: float) -> str:
    """A length in words, whole seconds cut like the attempts table's durations ("12 minutes 52 seconds")."""
    return seconds_in_words(int(seconds))


def _clock(when: datetime, seconds: bool = False) -> str:
    local = timezone.localtime(when)
    return f"{local:%H:%M:%S}" if seconds else f"{local:%H:%M}"


def _ticks(burst: _Burst) -> list[datetime]:
    """Round local times inside the burst (stepped in UTC, so a DST change cannot repeat or skip
    one), spaced at least ``MIN_TICK_PX`` apart."""
    width = burst.x1 - burst.x0
    minutes = next((m for m in TICK_MINUTES if width * m * 60 / max(burst.seconds, 1) >= MIN_TICK_PX), TICK_MINUTES[-1])
    local = timezone.localtime(burst.start).replace(second=0, microsecond=0)
    tick = (local - timedelta(minutes=(local.hour * 60 + local.minute) % minutes)).astimezone(UTC)
    ticks = []
    while tick <= burst.end:
        if tick >= burst.start:
            ticks.append(tick)
        tick += timedelta(minutes=minutes)
    return ticks


def _axis(bursts: Sequence[_Burst], y: float) -> SafeString:
    parts = []
    shown_date = None
    for index, burst in enumerate(bursts):
        parts.append(
            format_html('<line class="tl-axis" x1="{}" y1="{}" x2="{}" y2="{}"/>', _f(burst.x0), y, _f(burst.x1), y)
        )
        for tick in _ticks(burst):
            x = _f(burst.x(tick))
            local = timezone.localtime(tick)
            label = f"{local:%d %b %H:%M}" if local.date() != shown_date else f"{local:%H:%M}"
            shown_date = local.date()
            parts.append(
                format_html(
                    '<line class="tl-tick" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                    '<text class="tl-tick-label" x="{}" y="{}" text-anchor="middle">{}</text>',
                    x,
                    y,
                    x,
                    y + 5,
                    x,
                    y + 18,
                    label,
                )
            )
        if index + 1 < len(bursts):
            gap = bursts[index + 1].first - burst.last  # type: ignore[operator]
            mid = (burst.x1 + bursts[index + 1].x0) / 2
            parts.append(
                format_html(
                    '<g class="tl-break"><title>{} with no activity, left out of scale</title>'
                    '<line x1="{}" y1="{}" x2="{}" y2="{}"/><line x1="{}" y1="{}" x2="{}" y2="{}"/>'
                    '<text class="tl-break-label" x="{}" y="{}" text-anchor="middle">≈ {}</text></g>',
                    _span(gap.total_seconds()),
                    _f(mid - 7),
                    y + 6,
                    _f(mid - 1),
                    y - 6,
                    _f(mid + 1),
                    y + 6,
                    _f(mid + 7),
                    y - 6,
                    _f(mid),
                    y + 34,
                    _span(gap.total_seconds()),
                )
            )
    return mark_safe("".join(parts))  # noqa: S308 - every part was built by format_html


def _f(value: float) -> str:
    return f"{value:.1f}"


def _row_svg(row: _Row, bursts: Sequence[_Burst], y: float) -> SafeString:
    mid = y + ROW_HEIGHT / 2
    icon = ICONS.get(row.status, "•")
    word = row.status.replace("_", " ")
    parts = [
        format_html(
            '<text class="tl-label" x="4" y="{}">#{} {}</text>'
            '<text class="tl-status tl-status-{}" x="4" y="{}">{} {}</text>',
            _f(mid - 2),
            row.number,
            row.trigger,
            row.status,
            _f(mid + 12),
            icon,
            word,
        )
    ]
    if row.scheduled and row.started:
        delay = (row.started - row.scheduled).total_seconds()
        parts.append(
            format_html(
                '<line class="tl-delay" x1="{}" y1="{}" x2="{}" y2="{}"><title>started {} after its scheduled time'
                "</title></line>",
                _f(_x(bursts, row.scheduled)),
                _f(mid),
                _f(_x(bursts, row.started)),
                _f(mid),
                _span(abs(delay)) + ("" if delay >= 0 else " before"),
            )
        )
    end_x = None
    if row.started:
        x0 = _x(bursts, row.started)
        x1 = _x(bursts, row.ended) if row.ended else x0 + OPEN_BAR
        x1 = max(x1, x0 + 3)
        end_x = x1
        took = f", {_span((row.ended - row.started).total_seconds())}" if row.ended else ", not ended"
        ended = f" → ended {_clock(row.ended, True)}" if row.ended else ""
        parts.append(
            format_html(
                '<rect class="tl-bar tl-bar-{}{}" x="{}" y="{}" width="{}" height="14" rx="2">'
                "<title>attempt {}: started {}{}{} ({})</title></rect>",
                row.status,
                "" if row.ended else " tl-open",
                _f(x0),
                _f(mid - 7),
                _f(x1 - x0),
                row.number,
                _clock(row.started, True),
                ended,
                took,
                word,
            )
        )
    if row.scheduled:
        sx = _x(bursts, row.scheduled)
        parts.append(
            format_html(
                '<path class="tl-scheduled" d="M {} {} l 6 6 l -6 6 l -6 -6 z"><title>attempt {} scheduled for {}'
                "</title></path>",
                _f(sx),
                _f(mid - 6),
                row.number,
                _clock(row.scheduled, True),
            )
        )
    if end_x is not None:
        text = f"{icon} {word}"
        if row.ended and row.started:
            text += f" · {_span((row.ended - row.started).total_seconds())}"
        text_width = 7 * len(text)  # ~7 px a character at the axis' font size
        start_x = _x(bursts, row.scheduled or row.started)  # type: ignore[arg-type]
        if end_x + 8 + text_width <= WIDTH:  # after the bar
            parts.append(format_html('<text class="tl-note" x="{}" y="{}">{}</text>', _f(end_x + 6), _f(mid + 4), text))
        elif start_x - 10 - text_width >= LABEL_WIDTH:  # before it, clear of the row's label column
            parts.append(
                format_html(
                    '<text class="tl-note" x="{}" y="{}" text-anchor="end">{}</text>',
                    _f(start_x - 10),
                    _f(mid + 4),
                    text,
                )
            )
        else:  # a bar that spans the axis: inside it, at its end
            parts.append(
                format_html(
                    '<text class="tl-note tl-note-inside" x="{}" y="{}" text-anchor="end">{}</text>',
                    _f(end_x - 6),
                    _f(mid + 4),
                    text,
                )
            )
    elif not row.times:
        parts.append(
            format_html('<text class="tl-note" x="{}" y="{}">no time reported</text>', _f(LABEL_WIDTH + 8), _f(mid + 4))
        )
    return mark_safe("".join(parts))  # noqa: S308 - every part was built by format_html


def _description(rows: Sequence[_Row]) -> str:
    lines = []
    for row in rows:
        bits = [f"Attempt {row.number} ({row.trigger.lower()}): {row.status.replace('_', ' ')}"]
        if row.scheduled:
            bits.append(f"scheduled {_clock(row.scheduled, True)}")
        if row.started:
            bits.append(f"started {_clock(row.started, True)}")
        if row.ended:
            bits.append(f"ended {_clock(row.ended, True)}")
        lines.append(", ".join(bits) + ".")
    return " ".join(lines)


@register.simple_tag
def attempts_time_axis(run: object, attempts: Iterable[Attempt]) -> SafeString:
    """The attempts of ``run`` on a time axis as an inline ``<svg>``; empty when none reported a time."""
    rows = _rows(run, attempts)
    if not any(r.times for r in rows):
        return mark_safe("")
    bursts = _bursts(rows)
    _layout(bursts)
    height = TOP + ROW_HEIGHT * len(rows) + AXIS_HEIGHT
    zone = timezone.localtime(max(t for r in rows for t in r.times)).tzname()
    body = format_html_join("", "{}", ((_row_svg(row, bursts, TOP + i * ROW_HEIGHT),) for i, row in enumerate(rows)))
    grid = format_html_join(
        "",
        '<line class="tl-row-line" x1="0" y1="{}" x2="{}" y2="{}"/>',
        ((TOP + i * ROW_HEIGHT, WIDTH, TOP + i * ROW_HEIGHT) for i in range(1, len(rows))),
    )
    return format_html(
        '<svg class="time-axis" viewBox="0 0 {} {}" role="img" aria-labelledby="tl-title tl-desc"'
        ' xmlns="http://www.w3.org/2000/svg">'
        '<title id="tl-title">The attempts of this run on a time axis ({})</title><desc id="tl-desc">{}</desc>'
        "{}{}{}</svg>",
        WIDTH,
        height,
        zone,
        _description(rows),
        grid,
        body,
        _axis(bursts, TOP + ROW_HEIGHT * len(rows) + 10),
    )


BAR_UNITS = 1000.0
MIN_SEGMENT_UNITS = 4.0


@register.simple_tag
def ledger_bar(segments: Iterable[dict[str, object]]) -> SafeString:
    """The run totals bar as an inline ``<svg>``: one linked segment per outcome, sized by its count.

    ``segments``: ``{"outcome", "count"}`` dicts in display order (the run page's ``ledger.segments``).
    Drawn with SVG geometry rather than ``style="width: …"``, which the CSP (``style-src 'self'``)
    refuses. Each segment links to the items with that outcome and names its count in words.
    """
    shown = [(str(s["outcome"]), int(s["count"])) for s in segments if int(s["count"])]  # type: ignore[call-overload]
    total = sum(count for _, count in shown)
    if not total:
        return mark_safe("")
    widths = [max(MIN_SEGMENT_UNITS, BAR_UNITS * count / total) for _, count in shown]
    scale = BAR_UNITS / sum(widths)
    x = 0.0
    parts = []
    for (outcome, count), width in zip(shown, widths, strict=True):
        parts.append(
            format_html(
                '<a href="?outcome={}#ledger-items" aria-label="{} {}: show these items">'
                '<rect class="seg seg-{}" x="{}" y="0" width="{}" height="18"><title>{} {}</title></rect></a>',
                outcome,
                f"{count:,}",
                outcome,
                outcome,
                _f(x),
                _f(width * scale),
                f"{count:,}",
                outcome,
            )
        )
        x += width * scale
    label = ", ".join(f"{count:,} {outcome}" for outcome, count in shown)
    return format_html(
        '<svg class="ledger-bar ledger-bar-svg" viewBox="0 0 {} 18" preserveAspectRatio="none" role="group"'
        ' aria-label="{}" xmlns="http://www.w3.org/2000/svg">{}</svg>',
        int(BAR_UNITS),
        label,
        mark_safe("".join(parts)),  # noqa: S308 - every part was built by format_html
    )
