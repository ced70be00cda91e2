"""Durations are written in words on every main page ("30 minutes", never "1800 s"), and pages that show
a fire time with its check deadline keep both in the job's zone, UTC on hover (no CET beside UTC)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from approvals.replays.demo import demo_replay_load
from handover.handovers.demo import demo_handover_load
from handover.handovers.models import Handover
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job
from runs.checks.models import NextRunCheck
from runs.demo.loader import demo_load
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# a number of seconds written with the unit's symbol: "1800 s", "60 s)" (an em dash or a word may follow)
SECONDS_SYMBOL = re.compile(r"\b\d+ s\b")


def visible_text(html: str) -> str:
    html = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture
def demo(settings: Any) -> None:
    settings.AXES_ENABLED = False
    demo_load()
    demo_handover_load()
    demo_replay_load()


def test_main_pages_write_durations_in_words(demo: None) -> None:
    admin = UserFactory(admin=True)
    client = Client()
    client.force_login(admin)
    # one attempt placed off its slot, so the run page shows its early tolerance
    attempt = Attempt.objects.order_by("pk").first()
    assert attempt is not None
    Attempt.objects.filter(pk=attempt.pk).update(slot_offset_seconds=75, slot_tolerance_seconds=60)
    pages = ["/runs/", "/inbox/", "/handovers/", "/handovers/attention/", "/replays/", "/checks/", "/jobs/"]
    pages += [f"/runs/{run.public_id}/" for run in Run.objects.all()]
    pages += [f"/jobs/{job.public_id}/" for job in Job.objects.all()]
    pages += [f"/handovers/{h.public_id}/" for h in Handover.objects.all()]
    pages += [f"/checks/{c.public_id}/" for c in NextRunCheck.objects.all()]

    # the sources' own words ("Job exceeded its 3600 s deadline", a Kubernetes message) are shown as sent
    theirs = [e for e in Attempt.objects.values_list("error_summary", flat=True) if SECONDS_SYMBOL.search(e)]
    found = {}
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        text = visible_text(response.content.decode())
        for words in theirs:
            text = text.replace(words, "")
        hits = [text[max(0, m.start() - 60) : m.end() + 10] for m in SECONDS_SYMBOL.finditer(text)]
        if hits:
            found[path] = hits
    assert found == {}
    run_page = visible_text(client.get(f"/runs/{attempt.run.public_id}/").content.decode())
    assert "early tolerance 1 minute" in run_page


def test_check_pages_do_not_mix_the_jobs_zone_with_utc(demo: None) -> None:
    admin = UserFactory(admin=True)
    client = Client()
    client.force_login(admin)  # the person's zone is UTC (no preference); the demo's job runs in Europe/Berlin
    check = NextRunCheck.objects.select_related("target__job").first()
    assert check is not None and check.target.job.timezone != "UTC"

    for path in ("/checks/", f"/checks/{check.public_id}/"):
        html = client.get(path).content.decode()
        shown = re.findall(r"<time [^>]*>([^<]*)</time>", html)
        labels = {text.rsplit(" ", 1)[-1] for text in shown if text}
        assert labels and "UTC" not in labels, (path, labels)
