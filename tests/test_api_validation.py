"""Every filter, path and body parameter of the people's API is validated to a 400 problem (never a 500).

A matrix over every list endpoint and hostile query values (NUL, an unknown parameter, a repeated one,
a value outside the enum, a malformed UUID, boolean or date, dates in year 1 and 9999, a bad page),
each answering 400 problem details that name the parameter, with nothing written. Then the bodies and
paths that answered 500: NUL in a handover's escalation owner, a malformed token prefix, a check's
``after`` in year 1 or 9999, JSON nested too deeply, NUL inside a JSON or form body.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from django.urls import get_resolver
from django_filters import BooleanFilter, CharFilter, ChoiceFilter, IsoDateTimeFilter, UUIDFilter
from knox.models import AuthToken
from rest_framework import serializers

from approvals.recurrence.filters import RecurrenceFilterSet, SupportabilityFilterSet
from approvals.replays.filters import ReplayRequestFilterSet
from handover.core.fields import TextField
from handover.core.filters import StrictFilterSet
from handover.core.parsers import MAX_DEPTH
from handover.handovers.filters import HandoverFilterSet, HandoverRevisionFilterSet
from handover.handovers.models import Handover
from handover.handovers.services import handover_create
from handover.notifications.api import NotificationFilterSet
from handover.ownership.api import AgedWorkFilterSet
from handover.problems.filters import ProblemFilterSet
from runs.alerts.filters import AlertFilterSet, RefusedRequestFilterSet
from runs.attempts.filters import RunFilterSet
from runs.attempts.models import Run
from runs.audit.filters import AuditEventFilterSet
from runs.catalog.filters import JobFilterSet
from runs.checks.filters import NextRunCheckFilterSet
from runs.checks.models import NextRunCheck
from runs.ledger.filters import WorkItemChangeFilterSet, WorkItemFilterSet, WorkItemSearchFilterSet
from tests.factories import AttemptFactory, JobTargetFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
COUNTED = [
    "runs.Run",
    "runs.Attempt",
    "runs.Alert",
    "runs.TimelineEvent",
    "runs.AuditEvent",
    "runs.NextRunCheck",
    "runs.WorkItem",
    "handover.Handover",
    "approvals.ReplayRequest",
]


@dataclass
class Api:
    client: Client
    run: Run
    handover: Handover


@pytest.fixture
def api(db: None) -> Api:
    admin = UserFactory(username="validation-admin", admin=True)
    target = JobTargetFactory()
    run = RunFactory(job=target.job, tenant=target.tenant, target=target, failed=True)
    AttemptFactory(run=run, failed=True)
    handover = handover_create(actor=admin, runs=[run])
    client = Client()
    client.force_login(admin)
    return Api(client=client, run=run, handover=handover)


def counts() -> dict[str, int]:
    return {label: apps.get_model(label).objects.count() for label in COUNTED}


def assert_problem(response: Any, *names: str) -> dict[str, Any]:
    """A 400 validation problem whose ``errors`` name exactly ``names``."""
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"].startswith(PROBLEM)
    body = response.json()
    assert body["type"].endswith("/validation")
    assert body["status"] == 400 and body["title"] and body["detail"]
    assert sorted(body["errors"]) == sorted(names)
    assert all(isinstance(m, str) for messages in body["errors"].values() for m in messages)
    return body


# --- the list endpoints and their hostile query values -------------------------------------------------

# path template, its FilterSet, the pagination parameter it pages by, parameters every call needs
LISTS: list[tuple[str, type[StrictFilterSet] | None, str, dict[str, str]]] = [
    ("/api/v1/runs/", RunFilterSet, "page", {}),
    ("/api/v1/alerts/", AlertFilterSet, "page", {}),
    ("/api/v1/checks/", NextRunCheckFilterSet, "page", {}),
    ("/api/v1/audit-events/", AuditEventFilterSet, "page", {}),
    ("/api/v1/handovers/", HandoverFilterSet, "page", {}),
    ("/api/v1/handovers/{handover}/revisions/", HandoverRevisionFilterSet, "", {}),
    ("/api/v1/replays/", ReplayRequestFilterSet, "page", {}),
    ("/api/v1/replays/queue/", None, "page", {}),
    ("/api/v1/replays/{replay}/items/", None, "page", {}),  # no such request: the query is checked first
    ("/api/v1/items/", WorkItemSearchFilterSet, "page", {"record_id": "INV-1"}),
    ("/api/v1/runs/{run}/items/", WorkItemFilterSet, "cursor", {}),
    ("/api/v1/runs/{run}/items/changes/", WorkItemChangeFilterSet, "cursor", {}),
    ("/api/v1/runs/{run}/items/loads/", None, "page", {}),
    ("/api/v1/tokens/", None, "page", {}),
    ("/api/v1/integrations/", None, "page", {}),
    ("/api/v1/notifications/", NotificationFilterSet, "page", {}),
    ("/api/v1/integrations/refused-requests/", RefusedRequestFilterSet, "", {}),
    ("/api/v1/sources/", None, "", {}),
    ("/api/v1/jobs/", JobFilterSet, "page", {}),
    ("/api/v1/problems/", ProblemFilterSet, "page", {}),
    ("/api/v1/aged-work/", AgedWorkFilterSet, "page", {}),
    ("/api/v1/recurrence/", RecurrenceFilterSet, "", {}),
    ("/api/v1/supportability/", SupportabilityFilterSet, "", {}),
]


def hostile_values(filterset: type[StrictFilterSet] | None, paging: str) -> Iterator[tuple[str, str, str]]:
    """``(label, parameter, value)`` for every way a query value can be refused on this endpoint."""
    yield "unknown parameter", "colour", "blue"
    yield "NUL in a parameter's name", "st\x00atus", "x"
    if paging == "page":
        yield "page not a number", "page", "two"
        yield "page NUL", "page", "\x00"
        yield "page zero", "page", "0"
        yield "page_size negative", "page_size", "-5"
    if paging == "cursor":
        yield "page_size not a number", "page_size", "ten"
    for name, filter_ in (filterset.base_filters if filterset else {}).items():
        yield f"{name} NUL", name, f"a\x00{name}"
        if isinstance(filter_, ChoiceFilter):
            yield f"{name} outside the enum", name, "AAA"
        elif isinstance(filter_, BooleanFilter):
            yield f"{name} not a boolean", name, "maybe"
        elif isinstance(filter_, UUIDFilter):
            yield f"{name} not a UUID", name, "not-a-uuid"
        elif isinstance(filter_, IsoDateTimeFilter):
            yield f"{name} not a date", name, "yesterday"
            yield f"{name} in year 1", name, "0001-01-01T00:00:00Z"
            yield f"{name} in year 9999", name, "9999-12-31T23:59:59Z"
            yield f"{name} overflowing its offset", name, "9999-12-31T23:59:59-14:00"
        elif isinstance(filter_, CharFilter) and filter_.extra.get("required"):
            yield f"{name} empty", name, ""


MATRIX = [
    pytest.param(path, params, name, value, id=f"{path} {label}")
    for path, filterset, paging, params in LISTS
    for label, name, value in hostile_values(filterset, paging)
]


@pytest.mark.parametrize(("path", "params", "name", "value"), MATRIX)
def test_a_hostile_query_value_is_a_400_problem_naming_it(
    api: Api, path: str, params: dict[str, str], name: str, value: str
) -> None:
    url = path.format(run=api.run.public_id, handover=api.handover.public_id, replay=uuid.uuid4())
    before = counts()

    response = api.client.get(url, {**params, name: value})

    assert_problem(response, name.replace("\x00", "\\x00"))
    assert counts() == before


@pytest.mark.parametrize(("path", "filterset", "paging", "params"), [pytest.param(*row, id=row[0]) for row in LISTS])
def test_a_parameter_given_twice_is_a_400_and_the_clean_query_answers(
    api: Api, path: str, filterset: type[StrictFilterSet] | None, paging: str, params: dict[str, str]
) -> None:
    url = path.format(run=api.run.public_id, handover=api.handover.public_id, replay=uuid.uuid4())
    query = "&".join(f"{k}={v}" for k, v in params.items())
    repeated = "page_size=1&page_size=2" if paging else "format=json&format=json"

    assert_problem(api.client.get(f"{url}?{query}&{repeated}"), repeated.split("=")[0])
    assert api.client.get(f"{url}?{query}").status_code == (404 if "{replay}" in path else 200)


def _schema_path(path: str) -> str:
    return path.replace("{run}", "{id}").replace("{handover}", "{id}").replace("{replay}", "{id}")


def test_every_list_endpoint_of_the_schema_is_in_the_matrix(api: Api) -> None:
    schema = api.client.get("/api/schema/", {"format": "json"}).json()
    listed = {
        path
        for path, item in schema["paths"].items()
        if "get" in item
        and any(p["in"] == "query" for p in item["get"].get("parameters", []))
        and path.startswith("/api/v1/")
    }
    covered = {_schema_path(path) for path, *_ in LISTS}

    assert listed <= covered, listed - covered


def test_documented_filters_are_the_filtersets_filters(api: Api) -> None:
    schema = api.client.get("/api/schema/", {"format": "json"}).json()
    for path, filterset, paging, _ in LISTS:
        documented = {
            p["name"] for p in schema["paths"][_schema_path(path)]["get"].get("parameters", []) if p["in"] == "query"
        }
        expected = set(filterset.base_filters if filterset else ()) | (
            {"page", "page_size"} if paging == "page" else {"cursor", "page_size"} if paging == "cursor" else set()
        )
        assert documented == expected, path


def test_valid_filters_still_filter(api: Api) -> None:
    listed = api.client.get("/api/v1/runs/", {"status": "failed", "window_from": "2020-01-01T00:00:00Z"}).json()
    assert [r["id"] for r in listed["results"]] == [str(api.run.public_id)]
    assert api.client.get("/api/v1/runs/", {"status": "succeeded"}).json()["count"] == 0
    assert api.client.get("/api/v1/handovers/", {"open": "true", "mine": "false"}).json()["count"] == 1
    assert api.client.get("/api/v1/handovers/", {"open": "false"}).json()["count"] == 0


# --- paths and bodies that answered 500 ---------------------------------------------------------------


def test_nul_in_a_handovers_escalation_owner_is_a_400_and_changes_nothing(api: Api) -> None:
    url = f"/api/v1/handovers/{api.handover.public_id}/"

    json_body = api.client.patch(url, {"escalation_owner": "bob\x00"}, content_type="application/json")
    form_body = api.client.patch(url, "escalation_owner=bob%00", content_type="application/x-www-form-urlencoded")

    assert_problem(json_body, "body")
    assert_problem(form_body, "body")
    api.handover.refresh_from_db()
    assert api.handover.escalation_owner is None


def test_an_escalation_owner_longer_than_any_username_is_a_field_error(api: Api) -> None:
    url = f"/api/v1/handovers/{api.handover.public_id}/"

    response = api.client.patch(url, {"escalation_owner": "x" * 5000}, content_type="application/json")

    assert_problem(response, "escalation_owner")


@pytest.mark.parametrize("prefix", ["ho_%00abc", "ho_abc", "ho_1a2b3c4d5e6fz", "%00", "ho_1A2B3C4D5E6F", "x" * 300])
def test_a_malformed_token_prefix_is_a_404_problem(api: Api, prefix: str) -> None:
    before = AuthToken.objects.count()

    response = api.client.delete(f"/api/v1/tokens/{prefix}/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith(PROBLEM)
    assert AuthToken.objects.count() == before


def test_a_well_formed_prefix_nobody_holds_is_a_404_too(api: Api) -> None:
    assert api.client.delete("/api/v1/tokens/ho_0123456789ab/").status_code == 404


@pytest.mark.parametrize(
    "after", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "9999-12-31T23:59:59-14:00", "1969-12-31T23:59:59Z"]
)
def test_a_check_after_a_time_out_of_range_is_a_400_and_no_check(api: Api, after: str) -> None:
    body = {"target": str(api.run.target.public_id), "after": after}

    response = api.client.post("/api/v1/checks/", body, content_type="application/json")

    assert_problem(response, "after")
    assert NextRunCheck.objects.count() == 0


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/v1/replays/"),
        ("post", "/api/v1/checks/"),
        ("post", "/api/v1/handovers/"),
        ("patch", "/api/v1/handovers/{handover}/"),
        ("post", "/api/v1/tokens/"),
        ("post", "/api/v1/integrations/"),
        ("post", "/api/v1/replays/recovery-decisions/"),
    ],
)
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000, 100_000])
def test_json_nested_too_deeply_is_a_400_naming_the_body(api: Api, method: str, path: str, depth: int) -> None:
    url = path.format(handover=api.handover.public_id)
    before = counts()

    response = getattr(api.client, method)(url, nested(depth), content_type="application/json")

    body = assert_problem(response, "body")
    assert "nested too deeply" in body["errors"]["body"][0]
    assert counts() == before


def test_json_nested_up_to_the_limit_is_parsed(api: Api) -> None:
    # a body at the limit reaches the serializer, which names the fields it lacks
    response = api.client.post("/api/v1/replays/", nested(MAX_DEPTH), content_type="application/json")

    assert_problem(response, "kind", "reason", "run")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/replays/", {"run": "x", "kind": "absent_items", "reason": "r\x00"}),
        ("/api/v1/integrations/", {"name": "n", "mapping": {"fields": {"job_key": "a\x00"}}}),
        ("/api/v1/tokens/", {"label": "\x00"}),
        ("/api/v1/checks/", {"tar\x00get": "x"}),
    ],
)
def test_nul_anywhere_in_a_json_body_is_a_400(api: Api, path: str, body: dict[str, Any]) -> None:
    before = counts()

    response = api.client.post(path, json.dumps(body), content_type="application/json")

    assert_problem(response, "body")
    assert counts() == before


def test_malformed_json_is_a_400_problem(api: Api) -> None:
    response = api.client.post("/api/v1/replays/", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert response["Content-Type"].startswith(PROBLEM)
    assert response.json()["title"] == "Bad request"


def test_the_schema_documents_429_where_a_limit_applies(api: Api) -> None:
    paths = api.client.get("/api/schema/", {"format": "json"}).json()["paths"]

    for path in ("/api/v1/replays/{id}/approve/", "/api/v1/replays/{id}/reject/", "/api/v1/replays/reauthenticate/"):
        assert "429" in paths[path]["post"]["responses"], path
    assert "429" not in paths["/api/v1/runs/"]["get"]["responses"]


def test_a_custom_mappings_default_environment_must_be_a_slug(api: Api) -> None:
    from runs.catalog.models import Integration

    body = {"name": "nomad", "mapping": {"fields": {}, "defaults": {"environment": "prod/eu"}}}

    response = api.client.post("/api/v1/integrations/", body, content_type="application/json")

    assert "not an environment" in assert_problem(response, "mapping")["errors"]["mapping"][0]
    assert not Integration.objects.filter(name="nomad").exists()


@pytest.mark.parametrize(("path", "filterset", "paging", "params"), [pytest.param(*row, id=row[0]) for row in LISTS])
def test_a_method_the_endpoint_does_not_have_is_a_405_whatever_its_query(
    api: Api, path: str, filterset: type[StrictFilterSet] | None, paging: str, params: dict[str, str]
) -> None:
    url = path.format(run=api.run.public_id, handover=api.handover.public_id, replay=uuid.uuid4())
    query = "&".join(f"{k}={v}" for k, v in params.items())

    response = api.client.generic("TRACE", f"{url}?{query}&page=1&page_size=1")

    assert response.status_code == 405


# --- text fields take only a JSON string -----------------------------------------------------------------

TEXT_MESSAGE = "Must be text (a JSON string)."


def _state(api: Api) -> dict[str, Any]:
    """What the text-field bodies below could change: the counts, the handover's texts and the job's pause."""
    api.handover.refresh_from_db()
    api.run.job.refresh_from_db()
    return {
        **counts(),
        "tokens": AuthToken.objects.count(),
        "integrations": apps.get_model("runs.Integration").objects.count(),
        "residual_exceptions": apps.get_model("handover.ResidualException").objects.count(),
        "handover": (api.handover.version, api.handover.business_impact, api.handover.defect_ref),
        "job_paused_at": api.run.job.paused_at,
    }


# (label, method, path template, body with the text field as {value}, the field)
TEXT_BODIES: list[tuple[str, str, str, dict[str, Any], str]] = [
    (
        "handover edit",
        "patch",
        "/api/v1/handovers/{handover}/",
        {"version": 1, "business_impact": None},
        "business_impact",
    ),
    (
        "residual exception",
        "post",
        "/api/v1/handovers/{handover}/residual-exceptions/",
        {"description": None},
        "description",
    ),
    ("job resume", "post", "/api/v1/jobs/{job}/resume/", {"note": None}, "note"),
    ("api token", "post", "/api/v1/tokens/", {"label": None}, "label"),
    (
        "ledger change",
        "post",
        "/api/v1/runs/{run}/items/change/",
        {"record_id": None, "outcome": "completed", "note": "n"},
        "record_id",
    ),
    ("replay request", "post", "/api/v1/replays/", {"run": "{run}", "kind": "absent_items", "reason": None}, "reason"),
    ("integration", "post", "/api/v1/integrations/", {"name": None, "mapping": {"fields": {}}}, "name"),
    (
        "record ids",
        "post",
        "/api/v1/handovers/{handover}/residual-exceptions/",
        {"description": "d", "record_ids": ["INV-1", None]},
        "record_ids.1",
    ),
]


def _fill(value: Any, typed: Any, ids: dict[str, str]) -> Any:
    """``value`` with every None replaced by ``typed`` and every ``{name}`` string formatted with ``ids``."""
    if value is None:
        return typed
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, list):
        return [_fill(item, typed, ids) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, typed, ids) for key, item in value.items()}
    return value


@pytest.mark.parametrize(
    "typed",
    [pytest.param(1.3975787785941452e16, id="number"), pytest.param(7, id="integer"), pytest.param(True, id="boolean")],
)
@pytest.mark.parametrize(
    ("method", "path", "body", "field"), [pytest.param(*row[1:], id=row[0]) for row in TEXT_BODIES]
)
def test_a_number_or_boolean_for_a_text_field_is_a_400_and_writes_nothing(
    api: Api, method: str, path: str, body: dict[str, Any], field: str, typed: Any
) -> None:
    ids = {"handover": str(api.handover.public_id), "run": str(api.run.public_id), "job": str(api.run.job.public_id)}
    before = _state(api)

    response = getattr(api.client, method)(
        path.format(**ids), json.dumps(_fill(body, typed, ids)), content_type="application/json"
    )

    problem = assert_problem(response, field)
    assert TEXT_MESSAGE in json.dumps(problem["errors"][field])
    assert _state(api) == before


def _input_serializers() -> list[type[serializers.BaseSerializer[Any]]]:
    """Every input serializer of the apps (``<Entity><Action>InputSerializer``), with the URL conf imported."""
    get_resolver().url_patterns  # noqa: B018  # imports every API module

    def below(cls: type) -> Iterator[type]:
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    found = {
        cls
        for cls in below(serializers.BaseSerializer)
        if cls.__module__.split(".")[0] in {"handover", "runs", "approvals"}
        and cls.__name__.endswith("InputSerializer")
    }
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__name__}")


def _leaf_fields(fields: dict[str, serializers.Field[Any, Any, Any, Any]]) -> Iterator[tuple[str, Any]]:
    for name, field in fields.items():
        if isinstance(field, serializers.ListField | serializers.DictField):
            yield from _leaf_fields({f"{name}[]": field.child})
        elif isinstance(field, serializers.BaseSerializer) and hasattr(field, "fields"):
            yield from _leaf_fields({f"{name}.{key}": value for key, value in field.fields.items()})
        else:
            yield name, field


def test_every_input_serializers_text_fields_take_only_a_json_string(db: None) -> None:
    """The one text rule for API input: a text field is ``TextField`` (DRF's ``CharField`` stores a number as its
    digits), and a choice among texts refuses a number and a boolean."""
    classes = _input_serializers()
    assert len(classes) > 30  # the walk found the API's input serializers
    loose: list[str] = []
    for cls in classes:
        for name, field in _leaf_fields(dict(cls().fields)):
            where = f"{cls.__module__}.{cls.__name__}.{name}"
            if isinstance(field, serializers.CharField) and not isinstance(field, TextField):
                loose.append(f"{where}: {type(field).__name__}")
            elif isinstance(field, serializers.ChoiceField) and all(isinstance(key, str) for key in field.choices):
                for typed in (1, True):
                    try:
                        field.run_validation(typed)
                    except serializers.ValidationError:
                        continue
                    loose.append(f"{where}: takes {typed!r}")
    assert loose == []
