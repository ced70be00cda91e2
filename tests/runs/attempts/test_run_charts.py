"""The run page's time axis: attempts as a server-rendered SVG (runs/templatetags/run_charts.py)."""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime

from django.template import Context, Template
from django.utils import timezone

from runs.attempts.models import Attempt, Run
from runs.templatetags.run_charts import attempts_time_axis, ledger_bar

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN)


def the_story() -> tuple[Run, list[Attempt]]:
    """The generic story's run: two failed attempts at night, a replay in the morning (unsaved rows)."""
    run = Run(scheduled_for=at("2026-11-28 02:00"))
    attempts = [
        Attempt(
            run=run,
            number=1,
            trigger="scheduled",
            status="failed",
            started_at=at("2026-11-28 02:03:11"),
            ended_at=at("2026-11-28 02:19:40"),
        ),
        Attempt(
            run=run,
            number=2,
            trigger="automatic_retry",
            status="failed",
            started_at=at("2026-11-28 02:29:40"),
            ended_at=at("2026-11-28 02:31:02"),
        ),
        Attempt(
            run=run,
            number=3,
            trigger="manual_replay",
            status="succeeded",
            started_at=at("2026-11-28 10:00:20"),
            ended_at=at("2026-11-28 10:01:48"),
        ),
    ]
    return run, attempts


def test_time_axis_draws_each_attempt_with_its_status_in_words() -> None:
    run, attempts = the_story()
    with timezone.override(BERLIN):
        svg = str(attempts_time_axis(run, attempts))
    assert svg.startswith('<svg class="time-axis"') and svg.endswith("</svg>")
    assert svg.count('<rect class="tl-bar') == 3
    for label in ("#1 Scheduled", "#2 Automatic retry", "#3 Manual replay", "✖ failed", "✔ succeeded"):
        assert label in svg
    # scheduled vs actual start: the run's fire time for the scheduled attempt, and the delay to its start
    assert svg.count('class="tl-scheduled"') == 1
    assert "attempt 1 scheduled for 02:00:00" in svg
    assert "started 3 minutes 11 seconds after its scheduled time" in svg
    # the description reads the whole story for a screen reader
    assert "Attempt 3 (manual replay): succeeded, started 10:00:20, ended 10:01:48." in svg


def test_time_axis_breaks_a_long_quiet_gap_and_labels_it() -> None:
    run, attempts = the_story()
    with timezone.override(BERLIN):
        svg = str(attempts_time_axis(run, attempts))
    assert svg.count('<g class="tl-break">') == 1
    assert "≈ 7 hours 29 minutes" in svg  # from the retry's end, 02:31:02, to the replay's start, 10:00:20
    # each burst keeps its own scale: the 82-second retry is still several pixels wide
    widths = [float(w) for w in re.findall(r'<rect class="tl-bar[^"]*" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)]
    assert min(widths) >= 3


def test_time_axis_shows_times_in_the_viewers_zone() -> None:
    run, attempts = the_story()
    with timezone.override(zoneinfo.ZoneInfo("UTC")):
        svg = str(attempts_time_axis(run, attempts))
    assert "(UTC)" in svg and "attempt 1 scheduled for 01:00:00" in svg


def test_time_axis_has_no_script_and_no_inline_style() -> None:
    run, attempts = the_story()
    attempts[0].error_summary = "<script>alert(1)</script>"
    svg = str(Template("{% load run_charts %}{% attempts_time_axis run attempts %}").render(Context(locals())))
    assert "<script" not in svg and "style=" not in svg


def test_time_axis_is_empty_without_any_time_and_open_for_a_running_attempt() -> None:
    run = Run(scheduled_for=None)
    assert str(attempts_time_axis(run, [Attempt(run=run, number=1, trigger="catch_up", status="queued")])) == ""
    running = Attempt(run=run, number=1, trigger="catch_up", status="running", started_at=at("2026-11-28 02:00"))
    svg = str(attempts_time_axis(run, [running]))
    assert "tl-open" in svg and "not ended" in svg


def test_ledger_bar_sizes_segments_with_svg_geometry_and_names_each_count() -> None:
    svg = str(ledger_bar([{"outcome": "completed", "count": 5}, {"outcome": "skipped", "count": 1}]))
    assert 'aria-label="5 completed, 1 skipped"' in svg
    first = '<a href="?outcome=completed#ledger-items" aria-label="5 completed: show these items">'
    assert first + '<rect class="seg seg-completed" x="0.0" y="0" width="833.3"' in svg
    assert 'x="833.3" y="0" width="166.7"' in svg and "<title>1 skipped</title>" in svg
    assert "style=" not in svg  # the CSP refuses inline styles


def test_ledger_bar_keeps_a_tiny_segment_visible_and_is_empty_without_items() -> None:
    svg = str(ledger_bar([{"outcome": "completed", "count": 999_999}, {"outcome": "absent", "count": 1}]))
    widths = [float(w) for w in re.findall(r'width="([\d.]+)"', svg)]
    assert widths[-1] >= 4.0 and abs(sum(widths) - 1000) < 0.2
    assert str(ledger_bar([{"outcome": "completed", "count": 0}])) == ""


def test_a_lone_attempt_spanning_the_axis_keeps_its_note_clear_of_the_label_column() -> None:
    # found on the demo: one 13-minute attempt fills its burst, so its note ("✔ succeeded · 12 min
    # 52 s") fits neither after the bar nor before it, and was drawn over "#1 Scheduled"
    from runs.templatetags.run_charts import LABEL_WIDTH

    run = Run(scheduled_for=at("2026-11-29 02:00"))
    attempts = [
        Attempt(
            run=run,
            number=1,
            trigger="scheduled",
            status="succeeded",
            started_at=at("2026-11-29 02:00:04"),
            ended_at=at("2026-11-29 02:12:56"),
        )
    ]
    with timezone.override(BERLIN):
        svg = str(attempts_time_axis(run, attempts))

    notes = re.findall(r'<text class="(tl-note[^"]*)" x="([\d.]+)" y="[\d.]+"( text-anchor="end")?>([^<]+)</text>', svg)
    assert len(notes) == 1
    css_class, x, anchored_at_end, text = notes[0]
    assert text == "✔ succeeded · 12 minutes 52 seconds"
    left_edge = float(x) - 7 * len(text) if anchored_at_end else float(x)
    assert left_edge >= LABEL_WIDTH
    assert css_class == "tl-note tl-note-inside"  # white on the bar it sits in
