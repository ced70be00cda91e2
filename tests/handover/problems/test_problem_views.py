"""Problem pages: list with filters and CSV, new from a handover, the page's buttons, moves, unlink, demo."""

from __future__ import annotations

import csv
import io
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from handover.handovers.models import Handover
from handover.problems.models import Problem, ProblemEvent, ProblemHandover
from handover.problems.services import problem_create
from tests.handover.problems.conftest import ProblemWorld

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_new_problem_from_a_handover_page(pw: ProblemWorld) -> None:
    client = client_for(pw.support)
    page = client.get(f"/handovers/{pw.acme_handover.public_id}/").content.decode()
    assert f"/problems/new/?handover={pw.acme_handover.public_id}" in page

    form = client.get(f"/problems/new/?handover={pw.acme_handover.public_id}")
    assert form.status_code == 200 and pw.acme_handover.title in form.content.decode()
    response = client.post(
        f"/problems/new/?handover={pw.acme_handover.public_id}",
        {"title": "Acks lost", "defect_ref": "PRB-7", "clean_runs_required": 2},
    )

    problem = Problem.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/problems/{problem.public_id}/"
    assert list(problem.handovers.all()) == [pw.acme_handover] and problem.clean_runs_required == 2
    assert client.get(f"/problems/new/?handover={pw.borealis_handover.public_id}").status_code == 404
    assert client_for(pw.auditor).get(f"/problems/new/?handover={pw.acme_handover.public_id}").status_code == 403


def test_link_from_the_handover_page(pw: ProblemWorld) -> None:
    problem = problem_create(actor=pw.admin, title="Acks lost", handovers=[pw.acme_handover])
    client = client_for(pw.owner)
    page = client.get(f"/handovers/{pw.borealis_handover.public_id}/").content.decode()
    assert "Link to problem" in page and str(problem.public_id) in page

    response = client.post(
        f"/handovers/{pw.borealis_handover.public_id}/problems/", {"problem": str(problem.public_id)}
    )

    assert response.status_code == 302
    assert ProblemHandover.objects.filter(problem=problem, handover=pw.borealis_handover).exists()
    assert "Acks lost" in client.get(f"/handovers/{pw.borealis_handover.public_id}/").content.decode()


def test_the_page_offers_only_the_moves_the_status_allows_and_only_to_writers(pw: ProblemWorld) -> None:
    problem = problem_create(actor=pw.admin, title="Acks lost", handovers=[pw.acme_handover])
    page = client_for(pw.support).get(f"/problems/{problem.public_id}/").content.decode()
    values = {v for v in ("start_fix", "deploy_fix", "verify", "close", "reopen") if f'value="{v}"' in page}
    assert values == {"start_fix", "deploy_fix", "close"}

    reader = client_for(pw.auditor).get(f"/problems/{problem.public_id}/").content.decode()
    assert 'name="action"' not in reader and "Acks lost" in reader
    assert (
        client_for(pw.auditor).post(f"/problems/{problem.public_id}/transition/", {"action": "start_fix"}).status_code
        == 403
    )


def test_a_refused_move_comes_back_as_a_message_and_changes_nothing(pw: ProblemWorld) -> None:
    problem = problem_create(actor=pw.admin, title="Acks lost", handovers=[pw.acme_handover])
    client = client_for(pw.support)
    response = client.post(f"/problems/{problem.public_id}/transition/", {"action": "verify"}, follow=True)

    assert "cannot verify" in response.content.decode()
    assert Problem.objects.get(pk=problem.pk).status == "open"
    assert not ProblemEvent.objects.filter(problem=problem, kind="transitioned").exists()
    client.post(f"/problems/{problem.public_id}/transition/", {"action": "start_fix"})
    assert Problem.objects.get(pk=problem.pk).status == "fix_in_progress"


def test_edit_and_unlink_on_the_page(pw: ProblemWorld) -> None:
    problem = problem_create(actor=pw.admin, title="Acks lost", handovers=[pw.acme_handover, pw.borealis_handover])
    client = client_for(pw.owner)
    client.post(f"/problems/{problem.public_id}/edit/", {"title": "Acks dropped", "clean_runs_required": 5})
    client.post(f"/problems/{problem.public_id}/unlink/", {"handover": str(pw.borealis_handover.public_id)})

    problem.refresh_from_db()
    assert (problem.title, problem.clean_runs_required) == ("Acks dropped", 5)
    assert list(problem.handovers.all()) == [pw.acme_handover]


def test_list_filters_and_csv(pw: ProblemWorld) -> None:
    acme = problem_create(actor=pw.admin, title="=HYPERLINK(evil)", handovers=[pw.acme_handover])
    borealis = problem_create(actor=pw.admin, title="Borealis slow", handovers=[pw.borealis_handover])
    admin = client_for(pw.admin)
    assert str(borealis.public_id) in admin.get("/problems/", {"q": "bor"}).content.decode()
    assert str(acme.public_id) not in admin.get("/problems/", {"q": "bor"}).content.decode()
    assert str(acme.public_id) in admin.get("/problems/", {"tenant": "acme-foods"}).content.decode()
    assert str(borealis.public_id) not in admin.get("/problems/", {"status": "closed"}).content.decode()

    rows = list(csv.DictReader(io.StringIO(client_for(pw.support).get("/problems/export.csv").content.decode())))

    assert [r["id"] for r in rows] == [str(acme.public_id)]  # sam sees acme's problem only
    assert rows[0]["title"] == "'=HYPERLINK(evil)" and rows[0]["handovers_visible"] == "1"


def test_the_demo_links_one_problem_to_two_handovers_once() -> None:
    call_command("load_demo", demo=True, stdout=StringIO())
    call_command("load_demo", demo=True, stdout=StringIO())  # idempotent

    problem = Problem.objects.get()
    tenants = sorted(
        Handover.objects.filter(problem_links__problem=problem).values_list("links__run__tenant__slug", flat=True)
    )
    assert tenants == ["acme-foods", "ironbridge-telecom"] and problem.status == "fix_in_progress"
    windows = {
        h.links.get().run.window_start.isoformat() for h in Handover.objects.filter(problem_links__problem=problem)
    }
    assert windows == {"2026-11-26T23:00:00+00:00"}
    support = Client()
    support.force_login(get_user_model().objects.get(username="support"))
    assert support.get(f"/problems/{problem.public_id}/").status_code == 200
