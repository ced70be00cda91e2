"""Display helpers: ``when`` prints to the second in a ``<time>`` carrying UTC; every status has an icon."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.apps import apps
from django.db import models
from django.template import engines
from django.test import override_settings

from handover.templatetags.handover_tags import STATUS_ICONS, badge, when

STATEFUL_FIELDS = ("status", "outcome", "decision")


def _status_fields() -> list[tuple[str, models.Field]]:  # type: ignore[type-arg]
    found = []
    for model in apps.get_models():
        if model._meta.app_label not in ("runs", "handover", "approvals"):
            continue
        for field in model._meta.concrete_fields:
            name = field.name
            if field.choices and (name in STATEFUL_FIELDS or name.endswith(tuple(f"_{s}" for s in STATEFUL_FIELDS))):
                found.append((f"{model.__name__}.{name}", field))
    return found


def test_the_stateful_models_are_found() -> None:
    names = {name for name, _ in _status_fields()}
    assert {
        "Run.status",
        "Attempt.status",
        "Alert.outcome",
        "WorkItem.outcome",
        "WorkItem.runner_status",
        "WorkItemLoad.status",
        "ReplayRequest.status",
        "Dispatch.status",
        "Handover.status",
        "NextRunCheck.status",
    } <= names


@pytest.mark.parametrize(("name", "field"), _status_fields(), ids=[name for name, _ in _status_fields()])
def test_every_status_value_of_every_stateful_model_has_an_icon_and_a_word(name: str, field: models.Field) -> None:  # type: ignore[type-arg]
    for value, _label in field.choices or ():
        assert value in STATUS_ICONS, f"{name} = {value!r} has no icon (the badge would show only a dot)"
        html = str(badge(value))
        assert f"{STATUS_ICONS[value]} {value.replace('_', ' ')}</span>" in html, html


def test_icons_are_never_the_fallback_dot() -> None:
    assert "•" not in STATUS_ICONS.values()
    assert "• mystery" in str(badge("mystery"))


@pytest.mark.parametrize(
    ("value", "zone", "text", "iso"),
    [
        (
            datetime(2026, 11, 28, 1, 3, 11, 987654, tzinfo=UTC),
            "Europe/Berlin",
            "2026-11-28 02:03:11 CET",
            "2026-11-28T01:03:11+00:00",
        ),
        (
            datetime(2026, 11, 28, 1, 3, 11, 1, tzinfo=UTC),
            "UTC",
            "2026-11-28 01:03:11 UTC",
            "2026-11-28T01:03:11+00:00",
        ),
        (
            datetime(2026, 11, 26, 23, 0, tzinfo=UTC),
            "Europe/Berlin",
            "2026-11-27 00:00:00 CET",
            "2026-11-26T23:00:00+00:00",
        ),
        (
            datetime(2026, 7, 1, 12, 0, 0, 500000, tzinfo=UTC),
            "Europe/Berlin",
            "2026-07-01 14:00:00 CEST",
            "2026-07-01T12:00:00+00:00",
        ),
    ],
)
def test_when_prints_to_the_second_in_a_time_element_carrying_utc(
    value: datetime, zone: str, text: str, iso: str
) -> None:
    html = str(when(value, zone))
    assert html == f'<time datetime="{iso}" title="{iso[:10]} {iso[11:19]} UTC">{text}</time>'
    assert not re.search(r":\d\d\.\d", html)  # no fraction of a second anywhere


@override_settings(TIME_ZONE="America/New_York")
def test_when_uses_the_viewers_zone_by_default_and_a_dash_for_none() -> None:
    rendered = (
        engines["django"]
        .from_string("{% load handover_tags %}{{ t|when }}|{{ none|when }}")
        .render({"t": datetime(2026, 11, 28, 1, 3, 11, 250000, tzinfo=UTC), "none": None})
    )
    assert rendered == (
        '<time datetime="2026-11-28T01:03:11+00:00" title="2026-11-28 01:03:11 UTC">2026-11-27 20:03:11 EST</time>'
        '|<span class="muted">—</span>'
    )
