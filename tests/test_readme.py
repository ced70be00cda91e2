"""The README stays true: its first example posts a new alert and gets the answer it shows, the people it
names are the demo's users, and docs/screenshots/ holds exactly the screenshots it shows.

A README that drifts from the code (a renamed user, a changed payload, a screenshot renamed or left
behind) fails here rather than on a newcomer's machine.
"""

from __future__ import annotations

import json
import re
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from runs.alerts.models import Alert
from runs.attempts.models import Attempt
from runs.catalog.services import job_get_or_create, job_target_get_or_create, tenant_get_or_create
from runs.demo.loader import DEMO_JOB, DEMO_USERS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def _first_example() -> tuple[str, str]:
    """The README's first shell example after the two opening commands, and the JSON answer after it."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.S)
    assert blocks[0][0] == "bash" and "scripts/dev.sh" in blocks[0][1] and "scripts/test.sh" in blocks[0][1]
    (_, example), (answer_lang, answer) = blocks[1], blocks[2]
    assert answer_lang == "json"
    return example, answer


def test_the_readme_starts_with_the_two_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.S)
    assert first_block is not None and README.index("```bash") < README.index("\n## ")
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["scripts/dev.sh", "scripts/test.sh"]
    for script in commands:
        assert (REPO / script).stat().st_mode & 0o111, f"{script} is not executable"


@pytest.mark.django_db
def test_the_first_example_posts_a_new_alert_and_gets_the_answer_shown() -> None:
    example, answer = _first_example()
    # the setup the demo gives it: the job, the tenant, its target
    job, _ = job_get_or_create(key=DEMO_JOB["key"], defaults=DEMO_JOB["defaults"])
    tenant, _ = tenant_get_or_create(slug="acme-foods", name="Acme Foods")
    job_target_get_or_create(job=job, tenant=tenant, environment="prod")

    command = re.search(r"KEY=\$\(\.venv/bin/python manage\.py (.+?) \| tail -n 1\)", example)
    assert command is not None
    out = StringIO()
    call_command(*command.group(1).split(), stdout=out)
    key = out.getvalue().strip().splitlines()[-1]

    url = re.search(r"curl -s -X POST http://127\.0\.0\.1:8000(/api/v1/alerts/\w+/)", example)
    data = re.search(r"--data '(.*?)'\n", example + "\n", flags=re.S)
    assert url is not None and data is not None
    assert "$(date +%s)" in data.group(1), "the example must make a new execution id each time"
    shown = json.loads(answer)
    answers = []
    for _ in range(2):  # run twice, as a reader would: each time a new alert is accepted
        body = data.group(1).replace("'\"$(date +%s)\"'", str(time.time_ns()))
        response = Client(SERVER_NAME="localhost").post(
            url.group(1), data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
        )
        assert response.status_code == 202, response.content
        answers.append(response.json())
    for got in answers:
        assert set(got) == set(shown) and set(got["alerts"][0]) == set(shown["alerts"][0])
        assert got["alerts"][0]["outcome"] == shown["alerts"][0]["outcome"] == "accepted"
    assert Alert.objects.filter(outcome="accepted").count() == 2
    assert Attempt.objects.filter(execution_id__startswith="readme-", run__tenant=tenant).count() == 2


def test_the_people_the_readme_names_are_the_demo_users() -> None:
    seen = _section("What you will see")
    named = set(re.findall(r"\*\*([a-z-]+)\*\*", seen.split("\n\n")[1]))
    assert named == set(DEMO_USERS)
    journey = _section("The journey")
    usernames = set(re.findall(r"\(`([a-z-]+)`\)", journey))
    assert usernames and usernames <= set(DEMO_USERS), usernames - set(DEMO_USERS)
    journey_test = (REPO / "tests" / "journey" / "test_incident_journey.py").read_text()
    for username in usernames:
        assert f'("{username}", ' in journey_test, f"the journey has no person {username!r}"


def test_docs_screenshots_hold_exactly_the_readme_set_light_and_dark_desktop_and_phone() -> None:
    referenced = set(re.findall(r"docs/screenshots/([\w.-]+\.png)", README))
    on_disk = {p.name for p in (REPO / "docs" / "screenshots").glob("*.png")}
    assert referenced == on_disk
    steps = {name.removesuffix(".png") for name in referenced if not re.search(r"-(dark|phone)\.png$", name)}
    assert steps
    for step in steps:
        assert {f"{step}{v}.png" for v in ("", "-dark", "-phone", "-phone-dark")} <= referenced, step
