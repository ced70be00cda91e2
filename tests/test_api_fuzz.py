"""Schemathesis against ``/api/schema/`` with every check: zero server errors, zero schema violations.

Every operation of the schema is fuzzed in-process (the WSGI application) with ALL of schemathesis'
checks (``schemathesis.checks.CHECKS``: ``not_a_server_error``, ``status_code_conformance``,
``content_type_conformance``, ``response_headers_conformance``, ``response_schema_conformance``,
``negative_data_rejection``, ``positive_data_acceptance``, ``missing_required_header``,
``unsupported_method``, ``allow_header_conformance``, ``use_after_free``,
``ensure_resource_availability``, ``ignored_auth``, ``object_level_authorization``), in four
rounds: positive data, positive data with the path's ids set to real rows, negative data, and
positive data with a NUL appended to every string of the query and the JSON body.

Each operation is called with ITS OWN kind of credential: the ingestion endpoint with an integration
key, the runner endpoints (claimable, claim, runner-report) with the job's runner credential, and
the rest with the personal API token of the role that does that work (support, business owner,
technical owner, auditor or admin: ``role_for``), in the world of the authorisation matrix
(``tests/test_authz_matrix.py``: two tenants with runs, alerts, handovers, replays, checks).

Generated strings may hold NUL (``allow_x00``): the API refuses NUL with 400 where it cannot store
it, and a 400 for a case carrying NUL counts as a correct refusal (``positive_data_acceptance`` is
not asked of it). Each operation must get at least ``MIN_CASES`` answers other than 401. Failures
are collected per (operation, check) with one example and reported together per operation.
Seeded (``HANDOVER_FUZZ_SEED``; default fixed), ``HANDOVER_FUZZ_EXAMPLES`` cases per round; the summary
line ``schemathesis cases=N operations=M 5xx=K violations=V seed=S`` is printed at the end. Marked
``slow`` (runs once, on PostgreSQL, in CI); committed transactions so that one request's database
error cannot poison the next case.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis.errors import Unsatisfiable
from knox.models import AuthToken
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.specs.openapi.checks import positive_data_acceptance

from handover.wsgi import application
from runs.catalog.services import integration_key_create, runner_credential_create
from tests.test_authz_matrix import World

FUZZ_EXAMPLES = int(os.environ.get("HANDOVER_FUZZ_EXAMPLES", "15"))
FUZZ_SEED = int(os.environ.get("HANDOVER_FUZZ_SEED") or "20261129")
MIN_CASES = int(os.environ.get("HANDOVER_FUZZ_MIN_CASES", "20"))
NUL_EXAMPLES = max(FUZZ_EXAMPLES // 2, 1)

load_all_checks()
ALL_CHECKS = CHECKS.get_all()
schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
schema.config.generation.update(allow_x00=True, max_examples=FUZZ_EXAMPLES)
# The ``.json`` twins DRF's routers add to every route (``/api/v1/handovers/{id}/close{format}``) are not
# API operations of their own (pinned in test_api_regressions.py).
schema = schema.exclude(path_regex=r"\{format\}")
OPERATIONS = [result.ok() for result in schema.get_all_operations()]
RUNNER_PATHS = ("/api/v1/replays/claimable/", "/api/v1/replays/{id}/claim/", "/api/v1/replays/{id}/runner-report/")
INGEST_PATH = "/api/v1/alerts/{source}/"

# path -> the world's kind of object its ``{id}`` names (for the round with real ids)
ID_KINDS = {
    "/api/v1/alerts/": "alert",
    "/api/v1/checks/": "check",
    "/api/v1/handovers/": "handover",
    "/api/v1/integrations/": "integration",
    "/api/v1/jobs/": "job",
    "/api/v1/replays/": "replay",
    "/api/v1/runs/": "run",
}

TOTALS: Counter[str] = Counter()
FAILURES: dict[str, dict[str, str]] = defaultdict(dict)  # operation -> check -> first example


def role_for(method: str, path: str) -> str:
    """The role whose personal token calls this operation: who does that work in the product.

    Reads are the auditor's (who reads everything of their tenant) except the admin's pages
    (integrations, audit trail); writes go to who may make them: support for handovers, the work
    ledger, alert triage, checks and replay requests; the business owner approves and rejects
    replays; the technical owner pauses jobs and dispatches; the admin manages integrations; every
    person manages their own tokens (support here).
    """
    if path.startswith(("/api/v1/integrations/", "/api/v1/audit-events/")):
        return "admin"
    if path.startswith("/api/v1/tokens/"):
        return "support"
    if method == "GET":
        return "auditor"
    if path.startswith("/api/v1/jobs/") or path.endswith(("/dispatch/", "/settle/")):
        return "technical_owner"
    if path.endswith(("/approve/", "/reject/", "/reauthenticate/")):
        return "business_owner"
    if path.startswith("/api/v1/alerts/") and path.endswith("/reprocess/"):
        return "admin"
    return "support"


class Credentials:
    """The world and a credential of every kind: one token per role, an integration key, a runner credential."""

    def __init__(self) -> None:
        self.world = World()
        self.tokens = {}
        for role, user in self.world.users.items():
            _, self.tokens[role] = AuthToken.objects.create(user=user)
        integration = self.world.obj("integration", "site")
        self.ingest_key = integration_key_create(integration=integration, tenants=[self.world.obj("tenant", "own")]).key
        _, self.runner_key = runner_credential_create(job=self.world.obj("job", "own"))
        # a second token of the support person: the DELETE round revokes it, never the one in use
        spare, _ = AuthToken.objects.create(user=self.world.users["support"])
        self.spare_token_prefix = spare.token_key

    def headers_for(self, operation: Any) -> tuple[str, dict[str, str]]:
        """(credential kind, headers) for an operation."""
        path, method = operation.path, operation.method.upper()
        if path == INGEST_PATH:
            return "integration key", {"Authorization": f"Bearer {self.ingest_key}"}
        if path in RUNNER_PATHS:
            return "runner credential", {"Authorization": f"Bearer {self.runner_key}"}
        role = role_for(method, path)
        return f"{role} token", {"Authorization": f"Token {self.tokens[role]}"}

    def real_ids(self, operation: Any) -> dict[str, str] | None:
        """Path parameters naming rows of the world (the own tenant's), or None when the path has none."""
        path = operation.path
        if path == INGEST_PATH:
            return {"source": "generic"}
        if "{" not in path:
            return None
        values: dict[str, str] = {}
        if "{prefix}" in path:
            values["prefix"] = self.spare_token_prefix
        kind = next((k for prefix, k in ID_KINDS.items() if path.startswith(prefix)), None)
        if path.startswith("/api/v1/runs/{id}/items/loads/{load_id}/"):
            load = self.world.obj("load", "own")
            values.update(id=str(load.run.public_id), load_id=str(load.public_id))
        elif "{exception_id}" in path:
            exception = self.world.obj("exception", "own")
            values.update(id=str(exception.handover.public_id), exception_id=str(exception.public_id))
        elif "{id}" in path and kind is not None:
            values["id"] = str(self.world.obj(kind, "own").public_id)
        return values or None


# Rules that span fields or rows, which OpenAPI 3 cannot state, so a schema-valid request may be
# refused by them: the refusal must be a 400/409 problem-details answer naming the rule (checked in
# ``refused_by_a_cross_field_rule``). Each entry: (method, path template) -> the rule, for the note.
CROSS_FIELD_RULES: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/alerts/{source}/"): "the body must be the source's own format (a parser's rules)",
    ("GET", "/api/v1/runs/"): "window_from and window_to lie between 1970 and 2200",
    ("POST", "/api/v1/checks/"): "a check names a target or a run; `after` lies between 1970 and 2200",
    ("POST", "/api/v1/checks/{id}/waive/"): "a waiver needs a checkpoint and an owner who exists",
    ("POST", "/api/v1/checks/{id}/confirm/"): "only a check awaiting confirmation can be confirmed",
    ("POST", "/api/v1/handovers/"): "a handover's runs are failed runs of one job",
    ("PATCH", "/api/v1/handovers/{id}/"): (
        "an edit changes at least one section; owners exist; it names its base version, in the body or as "
        "If-Match (either one: 428 when neither)"
    ),
    ("POST", "/api/v1/handovers/{id}/residual-exceptions/"): "a residual exception's owner exists",
    ("PATCH", "/api/v1/handovers/{id}/residual-exceptions/{exception_id}/"): "an edit changes something",
    ("POST", "/api/v1/integrations/"): "a custom mapping compiles and its samples map",
    ("POST", "/api/v1/problems/"): "a problem's title is not blank once trimmed",
    ("PATCH", "/api/v1/problems/{id}/"): "a title is not blank once trimmed; a closed problem is reopened before edits",
    ("POST", "/api/v1/problems/{id}/transition/"): (
        "a move is allowed from the current status (verify only after N clean runs of every linked target); "
        "reopen, and close before verified, need a reason"
    ),
    ("POST", "/api/v1/problems/{id}/handovers/"): "a closed problem is reopened before its links change",
    (
        "DELETE",
        "/api/v1/problems/{id}/handovers/{handover_id}/",
    ): "a closed problem is reopened before its links change",
    ("POST", "/api/v1/integrations/{id}/keys/"): "a key is bound to named tenants or to all tenants (one of the two)",
    ("POST", "/api/v1/integrations/{id}/transport/"): "envelope item types are names, only with the envelope decoder",
    ("POST", "/api/v1/integrations/{id}/conventions/"): "conventions are the source adapter's named settings",
    ("GET", "/api/v1/recurrence/"): "`until` lies between 2000-01-01 and 2199-12-31",
    ("GET", "/api/v1/supportability/"): "`until` lies between 2000-01-01 and 2199-12-31",
    ("POST", "/api/v1/replays/"): "a replay's scope is absent items of one run (rule 2)",
    ("POST", "/api/v1/replays/{id}/scope/"): "a replay's scope is absent items of one run (rule 2)",
    ("POST", "/api/v1/replays/{id}/runner-report/"): "reported times lie between 1970 and 2200",
    ("POST", "/api/v1/runs/{id}/items/loads/"): "at least one file is uploaded, in a known kind",
    ("POST", "/api/v1/runs/{id}/items/failure-class/"): "a failure class is confirmed with a reason",
    ("POST", "/api/v1/runs/{id}/items/verify/"): "a verification names an item of the run and a provider reference",
    ("PATCH", "/api/v1/jobs/{id}/ownership/"): "an owner names a team and an active person who exist",
    (
        "PATCH",
        "/api/v1/jobs/{id}/targets/{target_id}/ownership/",
    ): "an owner names a team and an active person who exist",
}


def refused_by_a_cross_field_rule(operation: Any, response: Any) -> bool:
    """True for a 400/409/428 problem-details answer from an operation listed in ``CROSS_FIELD_RULES``."""
    if (operation.method.upper(), operation.path) not in CROSS_FIELD_RULES or response.status_code not in (
        400,
        409,
        428,
    ):
        return False
    content_type = " ".join(response.headers.get("content-type", []))  # lowercase keys, list values
    return "problem+json" in content_type and bool(response.text.strip())


def refused_by_a_precondition(case: Any, response: Any) -> bool:
    """True for a 412 problem-details answer to a case that sent ``If-Match``: whether a tag is the record's
    current ``ETag`` depends on the row as stored (``handover.core.edits.edit_precondition``), which a schema
    cannot state, so a generated tag is refused."""
    sent = {name.lower() for name in (case.headers or {})}
    if "if-match" not in sent or response.status_code != 412:
        return False
    content_type = " ".join(response.headers.get("content-type", []))  # lowercase keys, list values
    return "problem+json" in content_type and bool(response.text.strip())


def carries_nul(case: Any) -> bool:
    """Whether any generated part of the case holds a NUL (raw or escaped)."""
    parts = [case.path_parameters, case.query, case.headers, case.cookies, case.body]
    text = json.dumps(parts, default=str)
    return "\\u0000" in text or "\x00" in text or "%00" in text


def with_nul(case: Any) -> Any:
    """The case with a NUL appended to every string in its query and at the top of its JSON body."""
    if isinstance(case.query, dict):
        case.query = {k: (f"{v}\x00" if isinstance(v, str) else v) for k, v in case.query.items()}
    if isinstance(case.body, dict):
        case.body = {k: (f"{v}\x00" if isinstance(v, str) else v) for k, v in case.body.items()}
    return case


def failure_titles(exc: BaseException) -> list[str]:
    """The titles of the check failures one validation raised (a group, or a single failure)."""
    inner = getattr(exc, "exceptions", None)
    if inner:
        return [title for e in inner for title in failure_titles(e)]
    return [str(getattr(exc, "title", "") or type(exc).__name__)]


def describe(case: Any, response: Any) -> str:
    body = None if type(case.body).__name__ == "NotSet" else case.body
    shown = json.dumps(
        {"path": case.formatted_path, "query": case.query, "body": body}, default=repr, ensure_ascii=True
    )
    answer = f"{getattr(response, 'status_code', '?')}" if response is not None else "no answer"
    return f"{case.method} {shown[:400]} -> {answer}"


@pytest.fixture(scope="module", autouse=True)
def _report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    violations = sum(len(checks) for checks in FAILURES.values())
    line = (
        f"schemathesis cases={TOTALS['cases']} operations={len(TOTALS.keys() - {'cases', '5xx', 'non-401'})} "
        f"5xx={TOTALS['5xx']} violations={violations} seed={FUZZ_SEED}"
    )
    print(line)
    request.config.handover_summary_lines = [  # type: ignore[attr-defined]
        *getattr(request.config, "handover_summary_lines", []),
        line,
    ]


def fuzz_operation(operation: Any, credentials: Credentials) -> tuple[str, Counter[str], dict[str, str]]:
    """Run the four rounds against one operation; return its label, its counts and its failures."""
    kind, headers = credentials.headers_for(operation)
    label = f"{operation.label} [{kind}]"
    counts: Counter[str] = Counter()
    failures: dict[str, str] = {}

    def call(case: Any, mode: str) -> None:
        counts[mode] += 1
        TOTALS["cases"] += 1
        TOTALS[operation.label] += 1
        checks = ALL_CHECKS
        response = None
        try:
            response = case.call(headers=headers)
        except Exception as exc:  # noqa: BLE001 - a transport error is a finding too
            failures.setdefault(f"call raised {type(exc).__name__}", f"{exc}"[:300])
            return
        status = response.status_code
        if status != 401:
            counts["non-401"] += 1
        if status >= 500:
            TOTALS["5xx"] += 1
        if (
            (status == 400 and carries_nul(case))
            or refused_by_a_cross_field_rule(operation, response)
            or refused_by_a_precondition(case, response)
        ):
            checks = [c for c in ALL_CHECKS if c is not positive_data_acceptance]  # a correct refusal
        try:
            case.validate_response(
                response, checks=checks, headers=headers, transport_kwargs={"headers": dict(headers)}
            )
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every check failure is collected, not raised
            for title in failure_titles(exc):
                failures.setdefault(f"{title} ({mode})", describe(case, response))

    base = settings(deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck))
    real = credentials.real_ids(operation)
    rounds: list[tuple[str, Any, int]] = [("positive", operation.as_strategy(GenerationMode.POSITIVE), FUZZ_EXAMPLES)]
    if real:
        rounds.append(("real ids", operation.as_strategy(GenerationMode.POSITIVE, path_parameters=real), FUZZ_EXAMPLES))
    rounds.append(("negative", operation.as_strategy(GenerationMode.NEGATIVE), FUZZ_EXAMPLES))
    # NUL in every string input: the API must refuse it with 400 (or store it) -- never a 5xx
    nul = operation.as_strategy(GenerationMode.POSITIVE, path_parameters=real).map(with_nul)
    rounds.append(("nul", nul, NUL_EXAMPLES))
    for mode, strategy, examples in rounds:

        def round_of(mode: str, strategy: Any, examples: int) -> Any:
            @settings(base, max_examples=examples)
            @seed(FUZZ_SEED)
            @given(case=strategy)
            def run(case: Any) -> None:
                call(case, mode)

            return run

        try:
            round_of(mode, strategy, examples)()
        except Unsatisfiable:  # e.g. no negative data exists for an operation without parameters
            counts[f"{mode}: none possible"] += 1
    # an operation without inputs has one possible request: Hypothesis stops after it (and finds no
    # negative data); there every possible case is the minimum
    exhausted = counts["negative: none possible"] and counts["positive"] < FUZZ_EXAMPLES
    wanted = counts["positive"] if exhausted else MIN_CASES
    if counts["non-401"] < wanted:
        failures["too few cases"] = f"only {counts['non-401']} answers other than 401 (at least {wanted} wanted)"
    return label, counts, failures


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_api_conforms_to_its_schema_with_every_check(in_process_connections: None) -> None:
    """Every operation, with its own credential, against one world (built once: the budget is 5 minutes)."""
    credentials = Credentials()
    known = {(operation.method.upper(), operation.path) for operation in OPERATIONS}
    assert set(CROSS_FIELD_RULES) <= known, set(CROSS_FIELD_RULES) - known
    report = []
    for operation in OPERATIONS:
        label, counts, failures = fuzz_operation(operation, credentials)
        print(f"{label}: {dict(counts)}")
        for title, example in failures.items():
            FAILURES[label][title] = example
        if failures:
            report.append(f"{label}: {dict(counts)}")
            report += [f"    {title}\n        e.g. {example}" for title, example in sorted(failures.items())]
    assert not report, f"{len(FAILURES)} of {len(OPERATIONS)} operations fail:\n" + "\n".join(report)
