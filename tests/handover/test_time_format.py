"""The one time format: windows in the job's zone labelled with it (DST changes included), UTC on
hover, the "updated" stamp of polling lists, and backticks shown as code without letting markup in."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import time_machine
from django.template import engines
from django.utils import timezone

from handover.core.time_format import window_text
from handover.templatetags.handover_tags import inline_code, poll_stamp, window


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


@pytest.mark.parametrize(
    ("start", "end", "zone", "text", "title"),
    [
        # an hour inside a winter day: one date, one label
        (
            datetime(2026, 11, 28, 1, 0, tzinfo=UTC),
            datetime(2026, 11, 28, 2, 0, tzinfo=UTC),
            "Europe/Berlin",
            "2026-11-28 02:00–03:00 CET",
            "2026-11-28 01:00:00 – 2026-11-28 02:00:00 UTC",
        ),
        # a day-aligned window: both dates
        (
            datetime(2026, 11, 26, 23, 0, tzinfo=UTC),
            datetime(2026, 11, 27, 23, 0, tzinfo=UTC),
            "Europe/Berlin",
            "2026-11-27 00:00 – 2026-11-28 00:00 CET",
            "2026-11-26 23:00:00 – 2026-11-27 23:00:00 UTC",
        ),
        # the autumn change: a 25-hour local day, each edge with its own abbreviation
        (
            datetime(2026, 10, 24, 22, 0, tzinfo=UTC),
            datetime(2026, 10, 25, 23, 0, tzinfo=UTC),
            "Europe/Berlin",
            "2026-10-25 00:00 CEST – 2026-10-26 00:00 CET",
            "2026-10-24 22:00:00 – 2026-10-25 23:00:00 UTC",
        ),
        # the spring change in New York; seconds kept when an edge has them
        (
            datetime(2026, 3, 8, 6, 30, 15, 999, tzinfo=UTC),
            datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
            "America/New_York",
            "2026-03-08 01:30:15 EST – 2026-03-08 03:30 EDT",
            "2026-03-08 06:30:15 – 2026-03-08 07:30:00 UTC",
        ),
    ],
)
def test_window_is_written_in_the_jobs_zone_with_its_label_and_utc_on_hover(
    start: datetime, end: datetime, zone: str, text: str, title: str
) -> None:
    html = str(window(start, end, zone))

    assert text_of(html) == text
    assert f'title="{title}"' in html
    assert f'<time datetime="{start.replace(microsecond=0).isoformat()}">' in html
    assert f'<time datetime="{end.isoformat()}">' in html
    assert window_text(start, end, zone) == text


def test_window_tag_is_what_templates_use_and_a_dash_without_edges() -> None:
    rendered = (
        engines["django"]
        .from_string("{% load handover_tags %}{% window a b 'Europe/Berlin' %}|{% window none b 'UTC' %}")
        .render(
            {"a": datetime(2026, 7, 1, 0, 0, tzinfo=UTC), "b": datetime(2026, 7, 1, 1, 0, tzinfo=UTC), "none": None}
        )
    )
    assert text_of(rendered) == "2026-07-01 02:00–03:00 CEST|—"


def test_poll_stamp_shows_the_time_in_the_viewers_zone_with_utc_on_hover() -> None:
    with time_machine.travel(datetime(2026, 11, 28, 1, 3, 11, 500000, tzinfo=UTC), tick=False):
        timezone.activate("Europe/Berlin")
        try:
            html = str(poll_stamp())
        finally:
            timezone.deactivate()

    assert text_of(html) == "updated 02:03:11 CET"
    assert 'datetime="2026-11-28T01:03:11+00:00" title="2026-11-28 01:03:11 UTC"' in html


def test_inline_code_turns_backticks_into_code_and_escapes_everything_else() -> None:
    assert str(inline_code("job `nightly-x` is not registered")) == "job <code>nightly-x</code> is not registered"
    assert str(inline_code("`<script>alert(1)</script>` & <b>")) == (
        "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code> &amp; &lt;b&gt;"
    )
    assert str(inline_code("an odd ` backtick")) == "an odd ` backtick"
    assert str(inline_code(None)) == ""
