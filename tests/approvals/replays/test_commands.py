"""``manage.py set_replay_webhook``: admins set where replays are posted; the secret goes to the runner's operator."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from approvals.replays import webhook_client as webhooks
from approvals.replays.models import ReplayWebhook
from tests.approvals.conftest import World

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("set_replay_webhook", *args, stdout=out)
    return out.getvalue()


def test_sets_the_webhook_and_prints_its_secret_last(world: World) -> None:
    output = run("nightly-invoice-export", "https://runner.example.com/replays")
    secret = output.strip().splitlines()[-1]
    row = ReplayWebhook.objects.get(job=world.job)
    assert row.url == "https://runner.example.com/replays"
    assert secret == webhooks.webhook_secret(row.secret_salt) and secret not in row.secret_salt
    # idempotent: the same secret until rotated
    assert run("nightly-invoice-export", "https://runner.example.com/replays").strip().splitlines()[-1] == secret
    rotated = run("nightly-invoice-export", "https://runner.example.com/replays", "--rotate-secret")
    assert rotated.strip().splitlines()[-1] != secret
    assert ReplayWebhook.objects.count() == 1


@pytest.mark.parametrize(
    ("job", "url"), [("no-such-job", "https://runner.example.com/"), ("nightly-invoice-export", "http://127.0.0.1/")]
)
def test_refuses_an_unknown_job_or_an_internal_url(world: World, job: str, url: str) -> None:
    with pytest.raises(CommandError):
        run(job, url)
    assert not ReplayWebhook.objects.exists()
