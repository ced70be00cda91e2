"""Appearance: durations in words, the skip link and theme toggle on every page, contrast of both themes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.test import Client

from handover.templatetags.handover_tags import duration, seconds_in_words
from tests.factories import JobFactory, UserFactory

CSS = Path(__file__).resolve().parents[2] / "handover" / "static" / "handover" / "app.css"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (1800, "30 minutes"),
        (60, "1 minute"),
        (5400, "1 hour 30 minutes"),
        (3661, "1 hour 1 minute"),  # two units: the seconds are dropped
        (45, "45 seconds"),
        (0, "0 seconds"),
        (90061, "1 day 1 hour"),
        (-120, "-2 minutes"),
        (timedelta(minutes=12, seconds=52), "12 minutes 52 seconds"),
        (None, ""),
    ],
)
def test_seconds_in_words(value: object, words: str) -> None:
    assert seconds_in_words(value) == words  # type: ignore[arg-type]


def test_duration_between_instants_uses_the_same_words() -> None:
    start = datetime(2026, 11, 28, 1, 3, 11, tzinfo=UTC)
    assert duration(start, start + timedelta(minutes=16, seconds=29)) == "16 minutes 29 seconds"
    assert duration(start, None) == ""


@pytest.mark.django_db
def test_the_jobs_pages_show_grace_in_words() -> None:
    job = JobFactory(key="nightly-invoice-export", grace_seconds=1800)
    client = Client()
    client.force_login(UserFactory(is_superuser=True, is_staff=True))

    listing = client.get("/jobs/").content.decode()
    detail = client.get(f"/jobs/{job.public_id}/").content.decode()

    assert "30 minutes" in listing and "1800 s" not in listing
    assert "<dt>Grace</dt><dd>30 minutes" in detail


@pytest.mark.django_db
@pytest.mark.parametrize("signed_in", [False, True])
def test_every_page_starts_with_a_skip_link_to_main_and_offers_the_theme_toggle(signed_in: bool) -> None:
    client = Client()
    if signed_in:
        client.force_login(UserFactory())
    page = client.get("/runs/" if signed_in else "/login/", follow=True).content.decode()

    body = page.split("<body", 1)[1]
    first_link = re.search(r"<a [^>]*>", body)
    assert first_link and 'href="#main"' in first_link.group(0) and "skip-link" in first_link.group(0)
    assert '<main id="main"' in page
    assert 'id="theme-toggle"' in page and 'aria-pressed="false"' in page
    head = page.split("</head>", 1)[0]
    theme_script = re.search(r"<script [^>]*theme\.js[^>]*>", head)
    assert theme_script and "defer" not in theme_script.group(0) and "async" not in theme_script.group(0)


def _luminance(colour: str) -> float:
    hex_ = colour.lstrip("#")
    if len(hex_) == 3:
        hex_ = "".join(c * 2 for c in hex_)
    channels = [int(hex_[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _themes() -> dict[str, dict[str, str]]:
    text = CSS.read_text()
    light = re.search(r":root \{ color-scheme:light;(.*?)\}", text, re.S)
    dark = re.search(r":root\[data-theme=dark\] \{(.*?)\}", text, re.S)
    assert light and dark
    return {
        name: dict(re.findall(r"--([\w-]+):(#[0-9a-f]{3,6})", block.group(1)))
        for name, block in (("light", light), ("dark", dark))
    }


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_both_themes_keep_text_at_4_5_and_control_borders_at_3_to_1(theme: str) -> None:
    colours = _themes()[theme]

    for background in ("bg", "surface"):
        assert _contrast(colours["control"], colours[background]) >= 3, background  # input borders (1.4.11)
        for text in ("fg", "muted", "link"):
            assert _contrast(colours[text], colours[background]) >= 4.5, (text, background)  # text (1.4.3)
    for state in ("ok", "bad", "warn", "info"):
        assert _contrast(colours[state], colours[f"{state}-bg"]) >= 4.5, state  # badges
    assert _contrast(colours["th-fg"], colours["th-bg"]) >= 4.5
    assert _contrast(colours["neutral-fg"], colours["neutral-bg"]) >= 4.5


def test_the_dark_theme_follows_the_system_unless_the_person_chose_light() -> None:
    text = CSS.read_text()
    system = re.search(
        r"@media \(prefers-color-scheme: dark\) \{ :root:not\(\[data-theme=light\]\) \{(.*?)\} \}", text, re.S
    )
    assert system is not None
    assert dict(re.findall(r"--([\w-]+):(#[0-9a-f]{3,6})", system.group(1))) == _themes()["dark"]
