"""``/api/v1/problems/``: CRUD, transitions as problem details, links, visibility across tenants, export."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from handover.notifications.models import Team
from handover.problems.models import Problem, ProblemEvent, ProblemHandover
from handover.problems.services import problem_create, problem_transition
from tests.handover.problems.conftest import NIGHT, ProblemWorld

pytestmark = pytest.mark.django_db
BASE = "/api/v1/problems/"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, body, content_type="application/json")


def _both(pw: ProblemWorld) -> Problem:
    return problem_create(actor=pw.admin, title="Gateway acks lost", handovers=[pw.acme_handover, pw.borealis_handover])


def test_create_read_update_over_the_api(pw: ProblemWorld) -> None:
    Team.objects.create(name="ledger-team")
    client = client_for(pw.support)
    created = _post(
        client,
        BASE,
        {
            "title": "Gateway acks lost",
            "defect_ref": "PRB-2041",
            "owning_team": "ledger-team",
            "clean_runs_required": 2,
            "handovers": [str(pw.acme_handover.public_id)],
        },
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["status"], body["owning_team"], body["clean_runs_required"], body["may_write"]) == (
        "open",
        "ledger-team",
        2,
        True,
    )
    assert [h["id"] for h in body["handovers"]] == [str(pw.acme_handover.public_id)]
    problem = Problem.objects.get(public_id=body["id"])
    assert problem.created_by == pw.support and problem.owning_team is not None

    patched = client.patch(
        f"{BASE}{problem.public_id}/", {"title": "Acks lost under load", "owning_team": None}, "application/json"
    )
    assert patched.status_code == 200 and patched.json()["title"] == "Acks lost under load"
    problem.refresh_from_db()
    assert problem.title == "Acks lost under load" and problem.owning_team is None
    edited = ProblemEvent.objects.get(problem=problem, kind="edited")
    assert edited.data["changes"]["owning_team"] == {"from": "ledger-team", "to": None}

    listed = client.get(BASE, {"q": "ACKS"}).json()
    assert [p["id"] for p in listed["results"]] == [str(problem.public_id)]
    assert listed["results"][0]["handover_count"] == 1 and listed["results"][0]["run_count"] == 1
    assert client.get(BASE, {"q": "lost"}).json()["count"] == 0  # a prefix, not a substring
    assert client.get(BASE, {"status": "closed"}).json()["count"] == 0
    assert client.get(BASE, {"tenant": "ACME-FOODS"}).json()["count"] == 1
    assert client.get(BASE, {"job": "nightly-invoice-export"}).json()["count"] == 1
    assert client.get(BASE, {"bogus": "1"}).status_code == 400


def test_an_illegal_transition_is_409_problem_details_and_writes_nothing(pw: ProblemWorld) -> None:
    problem = _both(pw)
    before = ProblemEvent.objects.filter(problem=problem).count()

    response = _post(client_for(pw.support), f"{BASE}{problem.public_id}/transition/", {"action": "verify"})

    assert response.status_code == 409 and response["Content-Type"] == "application/problem+json"
    assert response.json()["type"].endswith("invalid-transition")
    problem.refresh_from_db()
    assert problem.status == "open" and ProblemEvent.objects.filter(problem=problem).count() == before


def test_a_missing_reason_is_400_with_the_field_named(pw: ProblemWorld) -> None:
    problem = _both(pw)
    response = _post(client_for(pw.owner), f"{BASE}{problem.public_id}/transition/", {"action": "close"})

    assert response.status_code == 400 and "reason" in response.json()["errors"]
    assert Problem.objects.get(pk=problem.pk).status == "open"
    unknown = _post(client_for(pw.owner), f"{BASE}{problem.public_id}/transition/", {"action": "explode"})
    assert unknown.status_code == 400 and "action" in unknown.json()["errors"]


def test_moved_to_fix_deployed_then_verified_after_n_clean_runs(pw: ProblemWorld) -> None:
    problem = problem_create(
        actor=pw.admin, title="Acks", clean_runs_required=1, handovers=[pw.acme_handover, pw.borealis_handover]
    )
    client = client_for(pw.owner)
    body = _post(client, f"{BASE}{problem.public_id}/transition/", {"action": "deploy_fix"}).json()
    assert body["status"] == "fix_deployed" and body["clean_runs"] == 0
    Problem.objects.filter(pk=problem.pk).update(fix_deployed_at=NIGHT + timedelta(days=1, hours=3))
    pw.next_run(pw.acme, day=1)
    assert _post(client, f"{BASE}{problem.public_id}/transition/", {"action": "verify"}).status_code == 409
    pw.next_run(pw.borealis, day=1)

    body = _post(client, f"{BASE}{problem.public_id}/transition/", {"action": "verify"}).json()

    assert body["status"] == "verified" and body["clean_runs"] == 1
    assert [(t["tenant"], t["clean"]) for t in body["targets"]] == [("acme-foods", 1), ("borealis-retail", 1)]


def test_a_reader_sees_but_may_not_write(pw: ProblemWorld) -> None:
    problem = _both(pw)
    for reader in (pw.auditor, pw.business):
        client = client_for(reader)
        detail = client.get(f"{BASE}{problem.public_id}/")
        assert detail.status_code == 200 and detail.json()["may_write"] is False
        assert _post(client, f"{BASE}{problem.public_id}/transition/", {"action": "start_fix"}).status_code == 403
        assert client.patch(f"{BASE}{problem.public_id}/", {"title": "x"}, "application/json").status_code == 403
        assert _post(client, BASE, {"title": "mine"}).status_code == 403
    assert Problem.objects.get(pk=problem.pk).status == "open"
    assert Problem.objects.count() == 1


def test_visibility_across_tenants_counts_only_visible_runs(pw: ProblemWorld) -> None:
    problem = _both(pw)
    problem_transition(problem=problem, action="deploy_fix", actor=pw.admin)
    Problem.objects.filter(pk=problem.pk).update(fix_deployed_at=NIGHT + timedelta(days=1, hours=3))
    pw.next_run(pw.acme, day=1)
    pw.next_run(pw.borealis, day=1)
    pw.next_run(pw.borealis, day=2)

    mine = client_for(pw.support).get(f"{BASE}{problem.public_id}/").json()
    assert [h["id"] for h in mine["handovers"]] == [str(pw.acme_handover.public_id)]
    assert {r["tenant"] for r in mine["runs"]} == {"acme-foods"}
    assert [t["tenant"] for t in mine["targets"]] == ["acme-foods"] and mine["clean_runs"] == 1
    assert all(e["handover"] != str(pw.borealis_handover.public_id) for e in mine["history"])
    listed = client_for(pw.support).get(BASE).json()["results"][0]
    assert (listed["handover_count"], listed["run_count"]) == (1, 1)

    theirs = client_for(pw.borealis_support).get(f"{BASE}{problem.public_id}/").json()
    assert [t["tenant"] for t in theirs["targets"]] == ["borealis-retail"] and theirs["clean_runs"] == 2
    everyone = client_for(pw.admin).get(f"{BASE}{problem.public_id}/").json()
    assert len(everyone["targets"]) == 2 and everyone["clean_runs"] == 1

    assert client_for(pw.nobody).get(f"{BASE}{problem.public_id}/").status_code == 404
    assert client_for(pw.nobody).get(BASE).json()["count"] == 0
    acme_only = problem_create(actor=pw.admin, title="Acme only", handovers=[pw.acme_handover])
    assert client_for(pw.borealis_support).get(f"{BASE}{acme_only.public_id}/").status_code == 404


def test_an_unlinked_problem_is_seen_by_its_author_and_admins_only(pw: ProblemWorld) -> None:
    body = _post(client_for(pw.support), BASE, {"title": "Not sure yet"}).json()
    path = f"{BASE}{body['id']}/"

    assert client_for(pw.support).get(path).status_code == 200
    assert client_for(pw.admin).get(path).status_code == 200
    assert client_for(pw.owner).get(path).status_code == 404
    assert client_for(pw.auditor).get(path).status_code == 404


def test_link_and_unlink_over_the_api(pw: ProblemWorld) -> None:
    problem = problem_create(actor=pw.admin, title="Acks", handovers=[pw.acme_handover])
    owner = client_for(pw.owner)
    linked = _post(owner, f"{BASE}{problem.public_id}/handovers/", {"handover": str(pw.borealis_handover.public_id)})
    assert linked.status_code == 200 and len(linked.json()["handovers"]) == 2
    hidden = _post(
        client_for(pw.support),
        f"{BASE}{problem.public_id}/handovers/",
        {"handover": str(pw.borealis_handover.public_id)},
    )
    assert hidden.status_code == 404  # sam may not see borealis' handover

    unlinked = owner.delete(f"{BASE}{problem.public_id}/handovers/{pw.borealis_handover.public_id}/")
    assert unlinked.status_code == 200 and len(unlinked.json()["handovers"]) == 1
    assert not ProblemHandover.objects.filter(problem=problem, handover=pw.borealis_handover).exists()
    kinds = list(ProblemEvent.objects.filter(problem=problem).order_by("id").values_list("kind", flat=True))
    assert kinds == ["created", "handover_linked", "handover_linked", "handover_unlinked"]


def test_markdown_export_shows_only_what_the_caller_sees(pw: ProblemWorld) -> None:
    problem = _both(pw)
    Problem.objects.filter(pk=problem.pk).update(description="Acks [lost](http://evil.example) <b>x</b>")

    text = client_for(pw.support).get(f"{BASE}{problem.public_id}/markdown/").content.decode()

    assert text.startswith("# Problem: Gateway acks lost")
    assert "acme-foods" in text and "borealis-retail" not in text
    assert "[lost](http" not in text and "<b>" not in text
    assert "| `nightly-invoice-export` | acme-foods | prod | 0 | 0 | — |" in text  # not deployed yet: 0 clean
    assert "- **Clean runs:** 0 of 3 required of every linked target" in text


def test_a_choice_given_empty_is_refused_free_text_given_empty_is_no_filter_and_an_empty_team_is_no_team(
    pw: ProblemWorld,
) -> None:
    client = client_for(pw.support)
    problem_create(actor=pw.support, title="Gateway drops acknowledgements")
    refused = client.get(BASE, {"status": ""})
    assert refused.status_code == 400 and "status" in refused.json()["errors"]
    assert [p["title"] for p in client.get(BASE, {"job": ""}).json()["results"]] == ["Gateway drops acknowledgements"]
    created = _post(client, BASE, {"title": "Another", "owning_team": ""})
    assert created.status_code == 400 and "owning_team" in created.json()["errors"]
    assert Problem.objects.filter(title="Another").count() == 0
