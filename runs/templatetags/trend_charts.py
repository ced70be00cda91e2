"""Server-rendered trend charts: failures per day or week as an SVG bar chart (no script, no chart library).

``{% failure_trend_chart points "chart-id" "title" %}`` draws one bar per ``TrendPoint``
(``runs.attempts.failures``), its count written above it and in its ``<title>``; the ``<desc>`` says
every bucket in words, and the page puts a table of the same figures beside it (the accessible
alternative). Colours come from the stylesheet through classes (the CSP allows no inline styles).
"""

from __future__ import annotations

from collections.abc import Sequence

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from runs.attempts.failures import TrendPoint

register = template.Library()

WIDTH = 800
HEIGHT = 200
LEFT = 36
RIGHT = 8
TOP = 18
BOTTOM = 34
MAX_LABELS = 10  # date labels under the axis: at most this many, evenly spaced


def _f(value: float) -> str:
    return f"{value:.1f}"


def _nice_max(value: int) -> int:
    """The axis top: the smallest of 1, 2, 5 × 10^n at or above ``value`` (at least 1)."""
    top = 1
    while True:
        for step in (1, 2, 5):
            if step * top >= value:
                return step * top
        top *= 10


@register.simple_tag
def failure_trend_chart(points: Sequence[TrendPoint], chart_id: str, title: str) -> SafeString:
    """``points`` as an inline ``<svg>`` bar chart labelled by ``chart_id``-title / -desc; empty without points."""
    if not points:
        return mark_safe("")
    top = _nice_max(max(p.failures for p in points))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    slot = plot_w / len(points)
    bar_w = max(slot * 0.7, 1.0)
    every = max(1, -(-len(points) // MAX_LABELS))
    parts = []
    for tick in (0, top // 2 if top > 1 else None, top):
        if tick is None:
            continue
        y = TOP + plot_h - plot_h * tick / top
        parts.append(
            format_html(
                '<line class="tr-grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                '<text class="tr-tick-label" x="{}" y="{}" text-anchor="end">{}</text>',
                LEFT,
                _f(y),
                WIDTH - RIGHT,
                _f(y),
                LEFT - 4,
                _f(y + 4),
                tick,
            )
        )
    for index, point in enumerate(points):
        x = LEFT + slot * index + (slot - bar_w) / 2
        h = plot_h * point.failures / top
        y = TOP + plot_h - h
        parts.append(
            format_html(
                '<rect class="tr-bar" x="{}" y="{}" width="{}" height="{}">'
                "<title>{}: {} failure{} ({} run{})</title></rect>",
                _f(x),
                _f(y),
                _f(bar_w),
                _f(max(h, 0.0)),
                point.label,
                point.failures,
                "" if point.failures == 1 else "s",
                point.runs,
                "" if point.runs == 1 else "s",
            )
        )
        if point.failures and slot >= 14:
            parts.append(
                format_html(
                    '<text class="tr-value" x="{}" y="{}" text-anchor="middle">{}</text>',
                    _f(x + bar_w / 2),
                    _f(y - 3),
                    point.failures,
                )
            )
        if index % every == 0:
            parts.append(
                format_html(
                    '<text class="tr-label" x="{}" y="{}" text-anchor="middle">{}</text>',
                    _f(x + bar_w / 2),
                    HEIGHT - BOTTOM + 16,
                    point.label,
                )
            )
    parts.append(
        format_html(
            '<line class="tr-axis" x1="{}" y1="{}" x2="{}" y2="{}"/>',
            LEFT,
            TOP + plot_h,
            WIDTH - RIGHT,
            TOP + plot_h,
        )
    )
    total = sum(p.failures for p in points)
    described = "; ".join(f"{p.label}: {p.failures}" for p in points)
    return format_html(
        '<svg class="trend-chart" viewBox="0 0 {} {}" role="img" aria-labelledby="{}-title {}-desc"'
        ' xmlns="http://www.w3.org/2000/svg"><title id="{}-title">{}</title>'
        '<desc id="{}-desc">{} failures in all. {}.</desc>{}</svg>',
        WIDTH,
        HEIGHT,
        chart_id,
        chart_id,
        chart_id,
        title,
        chart_id,
        total,
        described,
        format_html_join("", "{}", ((p,) for p in parts)),
    )
