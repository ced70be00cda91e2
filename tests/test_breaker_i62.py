"""Regressions found by breaking the pages as people would (issue i62): wrong roles, double and stale
submits, hostile form values. Each test failed before its fix."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from handover.handovers.models import Handover
from handover.handovers.services import handover_create, handover_refresh_generated
from handover.notifications.models import Notification, Team
from handover.ownership.services import job_ownership_set
from handover.problems.models import Problem
from handover.problems.services import problem_create
from runs.attempts.models import Run
from runs.catalog.models import Job
from runs.catalog.services import role_grant
from runs.ledger.models import WorkItem
from runs.timeline.models import TimelineEvent
from tests.factories import JobFactory, JobTargetFactory, RunFactory, TenantFactory, UserFactory
from tests.handover.helpers import edit_form_data

pytestmark = pytest.mark.django_db


def _support_with_handover() -> tuple[Run, User, Handover, Client]:
    """A failed run, a support person on its tenant, their handover of it and a client signed in as them."""
    run = RunFactory(status=Run.Status.FAILED)
    support = UserFactory()
    role_grant(user=support, role="support", obj=run.tenant)
    handover = handover_create(actor=support, runs=[run])
    client = Client()
    client.force_login(support)
    return run, support, handover, client


@pytest.mark.parametrize("next_value", ["abc", "-1", "home", "logout"])
def test_a_pause_form_whose_next_is_not_a_path_pauses_once_and_goes_back_to_the_pause_page(next_value: str) -> None:
    """``next`` is a path or nothing: a bare word was taken for a URL name (``redirect`` reverses it), so the
    pause was written and the answer was a 500 (NoReverseMatch), or a redirect to whatever view it named."""
    job = JobFactory()
    owner = UserFactory()
    role_grant(user=owner, role="technical_owner", obj=job)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    url = f"/jobs/{job.public_id}/pause/"

    response = client.post(url, {"reason": "ledger gateway maintenance", "next": next_value})

    assert response.status_code == 302 and response["Location"] == url
    assert Job.objects.get(pk=job.pk).pause_reason == "ledger gateway maintenance"
    assert TimelineEvent.objects.filter(kind=TimelineEvent.Kind.JOB_PAUSED, job=job).count() == 1


def _confirm_all_form(client: Client, handover: Handover) -> dict[str, str]:
    """The fields of the detail page's "Confirm generated text" form, as the browser would post them."""
    page = client.get(f"/handovers/{handover.public_id}/").content.decode()
    form = re.search(r'<form method="post" action="[^"]*/confirm-all/">(.*?)</form>', page, re.S)
    assert form is not None
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(1)))


def test_confirming_generated_text_the_evidence_changed_since_the_page_was_read_confirms_nothing() -> None:
    """Confirming is an edit and names its base version: a regeneration in between (a ledger load, another
    person's refresh) changed the text the person read, so nothing is confirmed and the page says so."""
    run, support, handover, client = _support_with_handover()
    form = _confirm_all_form(client, handover)
    read = Handover.objects.get(pk=handover.pk)
    # meanwhile the ledger says what reached the destination, and someone refreshes the generated text
    for record_id, outcome in (("INV-1", "completed"), ("INV-2", "absent")):
        WorkItem.objects.create(run=run, record_id=record_id, outcome=outcome, evidence_kind="destination_query")
    Run.objects.filter(pk=run.pk).update(
        eligible_count=2, completed_count=1, absent_count=1, unresolved_count=1, ledger_updated_at=timezone.now()
    )
    refreshed = handover_refresh_generated(handover=handover, actor=UserFactory(admin=True))
    assert refreshed.version > read.version and refreshed.generated_sections
    edits = TimelineEvent.objects.filter(kind="handover_edited").count()

    response = client.post(f"/handovers/{handover.public_id}/confirm-all/", form, follow=True)

    assert response.status_code == 200
    after = Handover.objects.get(pk=handover.pk)
    assert after.generated_sections == refreshed.generated_sections and after.version == refreshed.version
    assert TimelineEvent.objects.filter(kind="handover_edited").count() == edits
    assert "nothing was confirmed" in response.content.decode()
    # read again, the same form confirms the text now shown, once
    again = _confirm_all_form(client, handover)
    client.post(f"/handovers/{handover.public_id}/confirm-all/", again)
    twice = client.post(f"/handovers/{handover.public_id}/confirm-all/", again, follow=True)
    assert "No generated text is left to confirm." in twice.content.decode()
    assert Handover.objects.get(pk=handover.pk).generated_sections == []
    assert TimelineEvent.objects.filter(kind="handover_edited").count() == edits + 1


def test_a_jobs_ownership_page_shows_only_the_targets_of_tenants_the_viewer_may_see() -> None:
    """Support on one tenant opens the ownership page of a job that also runs for another client: that
    client's target (its slug, environment and owners) is not shown, as on the job's pause page."""
    job = JobFactory()
    own = JobTargetFactory(job=job, tenant=TenantFactory(slug="amberline"))
    JobTargetFactory(job=job, tenant=TenantFactory(slug="brightwater-secret-client"), environment="uat-b")
    support = UserFactory()
    role_grant(user=support, role="support", obj=own.tenant)
    client = Client()
    client.force_login(support)

    page = client.get(f"/jobs/{job.public_id}/ownership/").content.decode()

    assert "amberline" in page
    assert "brightwater-secret-client" not in page and "uat-b" not in page
    api = client.get(f"/api/v1/jobs/{job.public_id}/ownership/").json()
    assert [t["tenant"] for t in api["targets"]] == ["amberline"]


def _edit_form(client: Client, problem_id: object) -> dict[str, str]:
    """What the problem page's edit form posts when the person changes nothing (every field, hidden ones too)."""
    page = client.get(f"/problems/{problem_id}/").content.decode()
    form = re.search(r'<form method="post" action="/problems/[^"]*/edit/"[^>]*>(.*?)</form>', page, re.S)
    assert form is not None
    fields = dict(re.findall(r'<input type="(?:text|hidden|number)" name="(\w+)" value="([^"]*)"', form.group(1)))
    fields |= dict(re.findall(r'<textarea name="(\w+)"[^>]*>\n?(.*?)</textarea>', form.group(1), re.S))
    fields.pop("csrfmiddlewaretoken", None)
    return {name: html.unescape(value) for name, value in fields.items()}


def test_two_people_editing_a_problem_from_its_page_do_not_revert_each_other() -> None:
    """The edit form posts every field: a second tab (or person) that changed only the title put back the
    description as it was when the page was read, so the first person's edit was lost without a word."""
    run = RunFactory(status=Run.Status.FAILED)
    support, colleague = UserFactory(), UserFactory()
    for person in (support, colleague):
        role_grant(user=person, role="support", obj=run.tenant)
    handover = handover_create(actor=support, runs=[run])
    problem = problem_create(actor=support, title="Gateway timeouts", description="first notes", handovers=[handover])
    mine, theirs = Client(), Client()
    mine.force_login(support)
    theirs.force_login(colleague)
    my_form, their_form = _edit_form(mine, problem.public_id), _edit_form(theirs, problem.public_id)

    theirs.post(f"/problems/{problem.public_id}/edit/", {**their_form, "description": "gateway cert expired"})
    mine.post(f"/problems/{problem.public_id}/edit/", {**my_form, "title": "Ledger gateway timeouts"})

    after = Problem.objects.get(pk=problem.pk)
    assert (after.title, after.description) == ("Ledger gateway timeouts", "gateway cert expired")
    # both changed the same field: the later save is refused with the reason, nothing of it is written
    stale = mine.post(f"/problems/{problem.public_id}/edit/", {**my_form, "description": "my notes"}, follow=True)
    assert Problem.objects.get(pk=problem.pk).description == "gateway cert expired"
    assert (
        "Someone changed the description of this problem after you opened the page: nothing was saved."
        in stale.content.decode()
    )


def test_a_handover_owner_is_someone_who_may_see_its_runs() -> None:
    """Support named as escalation owner a person with a role on another client only, then handed over: that
    person was sent the handover's text (what happened to this client's invoices). The residual exceptions'
    owners already had to see every run; the handover's owners now too, and nothing is written or sent."""
    run = RunFactory(status=Run.Status.FAILED)
    support, outsider = UserFactory(), UserFactory(username="oscar-other-client")
    role_grant(user=support, role="support", obj=run.tenant)
    role_grant(user=outsider, role="business_owner", obj=TenantFactory())
    handover = handover_create(actor=support, runs=[run])
    client = Client()
    client.force_login(support)
    edits = TimelineEvent.objects.filter(kind="handover_edited").count()

    for field in ("escalation_owner", "customer_update_owner"):
        data = {**edit_form_data(handover), field: "oscar-other-client"}
        page = client.post(f"/handovers/{handover.public_id}/edit/", data).content.decode()
        assert "oscar-other-client may not see every run of this handover." in page

    after = Handover.objects.get(pk=handover.pk)
    assert after.escalation_owner is None and after.customer_update_owner is None and after.version == handover.version
    assert TimelineEvent.objects.filter(kind="handover_edited").count() == edits
    client.post(f"/handovers/{handover.public_id}/hand-over/")
    assert Handover.objects.get(pk=handover.pk).status == Handover.Status.DRAFT
    assert not Notification.objects.filter(recipient=outsider).exists()


def test_the_problem_pages_offer_only_the_teams_the_viewer_may_see() -> None:
    """A team the viewer may not see answers 404 on its page (docs/ownership.md), yet the problem list's team
    filter and the problem forms listed every team of the site, other clients' teams included."""
    run = RunFactory(status=Run.Status.FAILED)
    support = UserFactory()
    role_grant(user=support, role="support", obj=run.tenant)
    mine = Team.objects.create(name="amber-billing-squad")
    mine.members.add(support)
    theirs = Team.objects.create(name="brightwater-secret-squad")
    job_ownership_set(actor=UserFactory(admin=True), job=JobFactory(), team=theirs, escalation_owner=None)
    handover = handover_create(actor=support, runs=[run])
    problem = problem_create(actor=support, title="Gateway timeouts", handovers=[handover])
    client = Client()
    client.force_login(support)
    assert client.get(f"/teams/{theirs.public_id}/").status_code == 404

    for url in ("/problems/", f"/problems/new/?handover={handover.public_id}", f"/problems/{problem.public_id}/"):
        page = client.get(url).content.decode()
        assert "amber-billing-squad" in page and "brightwater-secret-squad" not in page, url
    # nor can the page's form name it
    data = {**_edit_form(client, problem.public_id), "owning_team": str(theirs.pk)}
    client.post(f"/problems/{problem.public_id}/edit/", data)
    assert Problem.objects.get(pk=problem.pk).owning_team is None
    # nor the API: another client's team is not found, as one that does not exist
    api_edit = client.patch(
        f"/api/v1/problems/{problem.public_id}/", {"owning_team": theirs.name}, content_type="application/json"
    )
    api_new = client.post(
        "/api/v1/problems/", {"title": "Other", "owning_team": theirs.name}, content_type="application/json"
    )
    assert api_edit.status_code == api_new.status_code == 400
    assert Problem.objects.get(pk=problem.pk).owning_team is None and not Problem.objects.filter(title="Other")
    assert (
        client.patch(
            f"/api/v1/problems/{problem.public_id}/", {"owning_team": mine.name}, content_type="application/json"
        ).status_code
        == 200
    )
    assert Problem.objects.get(pk=problem.pk).owning_team == mine


def _submission(client: Client, url: str) -> str:
    """The one-off ``submission`` token of the create form on the page at ``url``."""
    found = re.search(r'name="submission" value="([0-9a-f]{32})"', client.get(url).content.decode())
    assert found is not None, "the create form carries a one-off token"
    return found.group(1)


def test_a_create_form_sent_twice_creates_once_and_shows_the_first_result() -> None:
    """A double click on "Open problem" opened two problems, and on "Record" two residual exceptions: each
    form's one-off token (``handover.core.once``) makes the second sending answer with the first's result."""
    run, support, handover, client = _support_with_handover()
    new_url = f"/problems/new/?handover={handover.public_id}"
    problem_form = {"title": "Gateway timeouts", "clean_runs_required": "3", "submission": _submission(client, new_url)}

    first, second = client.post(new_url, problem_form), client.post(new_url, problem_form)

    [problem] = Problem.objects.filter(title="Gateway timeouts")
    assert first["Location"] == second["Location"] == f"/problems/{problem.public_id}/"
    assert "sent twice: it was saved once" in client.get(second["Location"]).content.decode()
    # a new render is a new token: opening a second problem on purpose still works
    client.post(new_url, {**problem_form, "submission": _submission(client, new_url)})
    assert Problem.objects.filter(title="Gateway timeouts").count() == 2

    detail = f"/handovers/{handover.public_id}/"
    exception_form = {"description": "INV-9 left to finance", "submission": _submission(client, detail)}
    client.post(f"{detail}exceptions/", exception_form)
    client.post(f"{detail}exceptions/", exception_form)
    assert handover.residual_exceptions.filter(description="INV-9 left to finance").count() == 1


def test_a_create_form_refused_may_be_sent_again_with_the_same_token() -> None:
    """A refusal by the service creates nothing and forgets the token: the same form, corrected, records."""
    run = RunFactory(status=Run.Status.FAILED)
    support, stranger = UserFactory(), UserFactory()
    role_grant(user=support, role="support", obj=run.tenant)
    role_grant(user=stranger, role="support", obj=TenantFactory())  # may not see this handover's runs
    handover = handover_create(actor=support, runs=[run])
    client = Client()
    client.force_login(support)
    detail = f"/handovers/{handover.public_id}/"
    form = {"description": "INV-9 left to finance", "submission": _submission(client, detail)}

    client.post(f"{detail}exceptions/", {**form, "owner": stranger.username})
    assert not handover.residual_exceptions.exists()
    client.post(f"{detail}exceptions/", {**form, "owner": support.username})
    assert handover.residual_exceptions.filter(owner=support).count() == 1


def test_the_problem_api_takes_text_only_as_a_json_string() -> None:
    """The schema says ``string``; DRF's CharField read a number as its digits (found by the API fuzzer)."""
    run = RunFactory(status=Run.Status.FAILED)
    support = UserFactory()
    role_grant(user=support, role="support", obj=run.tenant)
    client = Client()
    client.force_login(support)

    answer = client.post(
        "/api/v1/problems/", {"title": "x", "description": 1.3975787785941452e16}, content_type="application/json"
    )

    assert answer.status_code == 400 and answer.json()["errors"] == {"description": ["Must be text (a JSON string)."]}
    assert not Problem.objects.exists()
