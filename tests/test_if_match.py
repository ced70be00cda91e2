"""API writes that edit a stored record answer an ``ETag`` and honour ``If-Match`` (RFC 9110 §13.1.1).

For each versioned write (a problem's PATCH, a job's and a target's ownership PATCH, a custom
integration's PATCH and mapping PUT, an integration's transport and conventions): the detail answers a
strong ``ETag``; a write with the current one is saved and answers the new one; a write sent with a tag
read before someone else's write answers 412 and writes nothing (no row, no event); ``*`` matches; a
malformed or weak tag answers 412; no ``If-Match`` writes as before. ``handover.core.edits``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from handover.core.edits import edit_etag, edit_precondition
from handover.core.errors import PreconditionFailed
from handover.ownership.models import JobOwnership, TargetOwnership
from handover.ownership.services import ownership_values
from handover.problems.models import Problem, ProblemEvent
from handover.problems.services import problem_create
from runs.alerts.mapping import integration_custom_create
from runs.audit.models import AuditEvent
from runs.catalog.models import Integration
from runs.catalog.services import integration_get_or_create
from runs.timeline.models import TimelineEvent
from tests.factories import JobFactory, JobTargetFactory, TenantFactory, UserFactory
from tests.runs.custom_support import load_mapping

ETAG = re.compile(r'^"[0-9a-f]{32}"$')


@dataclass
class Case:
    """One versioned write: where to read it, how to write it, what a write changes and records."""

    client: Client
    read_url: str
    write_url: str
    method: str  # "patch", "put" or "post"
    mine: dict[str, Any]  # the change under test
    theirs: dict[str, Any]  # another client's change, made between the read and the write
    stored: Callable[[], Any]  # the record's stored values
    records_event: bool  # a saved write adds an event (problem history, timeline or audit)

    def read(self) -> Any:
        return self.client.get(self.read_url)

    def write(self, body: dict[str, Any], if_match: str | None = None) -> Any:
        headers = {} if if_match is None else {"HTTP_IF_MATCH": if_match}
        send = getattr(self.client, self.method)
        return send(self.write_url, body, content_type="application/json", **headers)


def events() -> tuple[int, int, int]:
    """The rows a write records: problem history, timeline events, audit events."""
    return ProblemEvent.objects.count(), TimelineEvent.objects.count(), AuditEvent.objects.count()


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _problem(admin: Any) -> Case:
    problem = problem_create(actor=admin, title="Gateway acks lost", description="Acks vanish under load.")
    url = f"/api/v1/problems/{problem.public_id}/"
    return Case(
        client=_client(admin),
        read_url=url,
        write_url=url,
        method="patch",
        mine={"title": "Acks lost at the gateway"},
        theirs={"description": "Acks vanish after a deploy."},  # another field: If-Match refuses all the same
        stored=lambda: Problem.objects.values_list("title", "description").get(pk=problem.pk),
        records_event=True,
    )


def _job_ownership(admin: Any) -> Case:
    job = JobFactory()
    return _ownership_case(
        admin,
        f"/api/v1/jobs/{job.public_id}/ownership/",
        lambda: ownership_values(JobOwnership.objects.filter(job=job).first()),
    )


def _target_ownership(admin: Any) -> Case:
    target = JobTargetFactory(job=JobFactory(), tenant=TenantFactory())
    return _ownership_case(
        admin,
        f"/api/v1/jobs/{target.job.public_id}/targets/{target.public_id}/ownership/",
        lambda: ownership_values(TargetOwnership.objects.filter(target=target).first()),
    )


def _ownership_case(admin: Any, url: str, stored: Callable[[], Any]) -> Case:
    """An ownership record read and patched at ``url``: two people who may be named its escalation owner."""
    UserFactory(username="ann-owner")
    UserFactory(username="bob-owner")
    return Case(
        client=_client(admin),
        read_url=url,
        write_url=url,
        method="patch",
        mine={"escalation_owner": "ann-owner"},
        theirs={"escalation_owner": "bob-owner"},
        stored=stored,
        records_event=True,
    )


def _integration_values(integration: Integration) -> Callable[[], Any]:
    return lambda: Integration.objects.values_list("name", "is_active", "settings").get(pk=integration.pk)


def _custom(admin: Any) -> Integration:
    return integration_custom_create(name="nomad-prod", mapping=load_mapping("nomad"), samples=[], created_by=admin)


def _integration(admin: Any) -> Case:
    integration = _custom(admin)
    url = f"/api/v1/integrations/{integration.public_id}/"
    return Case(
        client=_client(admin),
        read_url=url,
        write_url=url,
        method="patch",
        mine={"name": "nomad-production"},
        theirs={"is_active": False},
        stored=_integration_values(integration),
        records_event=False,  # a custom integration's change is logged, not an audit event
    )


def _mapping(admin: Any) -> Case:
    integration = _custom(admin)
    url = f"/api/v1/integrations/{integration.public_id}/mapping/"
    return Case(
        client=_client(admin),
        read_url=url,
        write_url=url,
        method="put",
        mine={"mapping": load_mapping("jenkins")},
        theirs={"mapping": {**load_mapping("nomad"), "correlate_by": "execution_id"}},
        stored=_integration_values(integration),
        records_event=False,
    )


def _transport(admin: Any) -> Case:
    integration = integration_get_or_create(source="generic", name="generic-if-match")
    return Case(
        client=_client(admin),
        read_url=f"/api/v1/integrations/{integration.public_id}/",
        write_url=f"/api/v1/integrations/{integration.public_id}/transport/",
        method="post",
        mine={"allow_get": True, "decoder": "json"},
        theirs={"allow_get": False, "decoder": "ndjson"},
        stored=_integration_values(integration),
        records_event=True,
    )


def _conventions(admin: Any) -> Case:
    integration = integration_get_or_create(source="alertmanager", name="alertmanager-if-match")
    return Case(
        client=_client(admin),
        read_url=f"/api/v1/integrations/{integration.public_id}/",
        write_url=f"/api/v1/integrations/{integration.public_id}/conventions/",
        method="post",
        mine={"values": {"job_from": "labels.job"}},
        theirs={"values": {"tenant_from": "labels.customer"}},
        stored=_integration_values(integration),
        records_event=True,
    )


CASES = {
    "problem": _problem,
    "job_ownership": _job_ownership,
    "target_ownership": _target_ownership,
    "integration": _integration,
    "integration_mapping": _mapping,
    "integration_transport": _transport,
    "integration_conventions": _conventions,
}


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest, db: None) -> Case:
    return CASES[request.param](UserFactory(admin=True))


def _assert_refused(answer: Any) -> None:
    assert answer.status_code == 412, answer.content
    assert answer["Content-Type"] == "application/problem+json"
    body = answer.json()
    assert body["type"].endswith("/precondition-failed") and body["status"] == 412
    assert "nothing was saved" in body["detail"]


def test_the_detail_answers_a_strong_etag_that_stays_while_nothing_changes(case: Case) -> None:
    first, again = case.read(), case.read()

    assert first.status_code == 200, first.content
    assert ETAG.match(first["ETag"]) and again["ETag"] == first["ETag"]


def test_a_write_with_the_current_etag_is_saved_and_answers_the_new_etag(case: Case) -> None:
    tag, before, recorded = case.read()["ETag"], case.stored(), events()

    answer = case.write(case.mine, if_match=tag)

    assert answer.status_code == 200, answer.content
    assert case.stored() != before
    assert (events() != recorded) is case.records_event
    assert answer["ETag"] != tag and answer["ETag"] == case.read()["ETag"]


def test_a_write_with_an_etag_read_before_another_write_is_refused_and_writes_nothing(case: Case) -> None:
    tag = case.read()["ETag"]
    assert case.write(case.theirs).status_code == 200  # another client writes after the read
    after_theirs, recorded = case.stored(), events()

    answer = case.write(case.mine, if_match=tag)

    _assert_refused(answer)
    assert f"ETag {tag} is no longer current" in answer.json()["detail"]
    assert "Read it again, then redo your change" in answer.json()["detail"]
    assert case.stored() == after_theirs and events() == recorded
    # read again, then the same change goes through
    assert case.write(case.mine, if_match=case.read()["ETag"]).status_code == 200
    assert case.stored() != after_theirs


def test_if_match_star_matches_the_existing_record(case: Case) -> None:
    before = case.stored()

    answer = case.write(case.mine, if_match="*")

    assert answer.status_code == 200, answer.content
    assert case.stored() != before
    assert answer["ETag"] == case.read()["ETag"]


@pytest.mark.parametrize("sent", ["not-a-tag", '"unterminated', '"a" "b"', "**", "W/"])
def test_a_malformed_if_match_is_refused_and_writes_nothing(case: Case, sent: str) -> None:
    before, recorded = case.stored(), events()

    answer = case.write(case.mine, if_match=sent)

    _assert_refused(answer)
    assert "is not `*` nor a quoted ETag" in answer.json()["detail"]
    assert case.stored() == before and events() == recorded


def test_a_weak_form_of_the_current_etag_never_matches(case: Case) -> None:
    before = case.stored()

    _assert_refused(case.write(case.mine, if_match="W/" + case.read()["ETag"]))
    assert case.stored() == before


def test_a_write_without_if_match_is_saved_as_before(case: Case) -> None:
    before, recorded = case.stored(), events()

    answer = case.write(case.mine)

    assert answer.status_code == 200, answer.content
    assert case.stored() != before
    assert (events() != recorded) is case.records_event
    assert ETAG.match(answer["ETag"])


def test_a_list_of_tags_matches_when_one_is_current() -> None:
    current = {"title": "A"}
    tag = edit_etag(current)

    edit_precondition(if_match=f'"0000", {tag}', current=current, what="this")
    edit_precondition(if_match="  ", current=current, what="this")  # blank: no precondition
    with pytest.raises(PreconditionFailed):
        edit_precondition(if_match='"0000", W/' + tag, current=current, what="this")
    assert edit_etag({"title": "B"}) != tag and edit_etag(dict(current)) == tag
