"""The authorisation matrix: every URL and API endpoint x every role x own tenant / other tenant.

Generated from the URL conf: a URL (or an API method) without an entry in ``tests/authz_rules.py``
fails ``test_every_endpoint_has_a_rule``, and every case the rules describe is requested by
``test_authorisation_matrix`` as a person of each role against a small world of two tenants. All
mismatches are reported together, as a table.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import AbstractBaseUser, Group
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from approvals.replays.models import ReplayRequest
from handover.handovers.services import handover_create, residual_exception_create
from handover.problems.services import problem_create
from runs.alerts.models import Alert, Delivery
from runs.audit.models import AuditEvent
from runs.catalog.services import integration_get_or_create, integration_key_create, role_grant
from runs.ledger.models import WorkItem, WorkItemLoad
from tests.authz_rules import (
    ADMIN_SITE,
    ANY,
    DENY,
    HIDE,
    KEY,
    LISTED,
    LOGIN,
    OK,
    ROLES,
    RULES,
    SCOPES,
    UNLISTED,
    Outcome,
    Rule,
    key_only,
)
from tests.factories import (
    AttemptFactory,
    JobFactory,
    JobTargetFactory,
    NextRunCheckFactory,
    RunFactory,
    TenantFactory,
    UserFactory,
)

SUFFIX = "drf_format_suffix"
LOGIN_PATHS = ("/login/", "/admin/login/")


@dataclass(frozen=True)
class Endpoint:
    route: str
    name: str
    key: str  # the rule's key: the URL name, or the route for unnamed URLs
    callback: Any

    @property
    def is_api(self) -> bool:
        return self.route.startswith("api/")

    @property
    def is_admin(self) -> bool:
        return self.route.startswith("admin/")

    def drf_methods(self) -> set[str] | None:
        """The methods a DRF view answers (viewset actions or APIView handlers); None for Django views."""
        actions = getattr(self.callback, "actions", None)
        if actions:
            return {m.upper() for m in actions} - {"HEAD"}  # HEAD is GET without the body
        view_class = getattr(self.callback, "view_class", None)
        cls = getattr(self.callback, "cls", None)
        if cls is not None and view_class is not None:
            return {
                m.upper()
                for m in view_class.http_method_names
                if hasattr(view_class, m) and m not in ("options", "head")
            }
        return None


def endpoints() -> list[Endpoint]:
    """Every URL pattern of the project, format-suffix twins left out (they share their twin's view)."""

    def walk(patterns: list[Any], prefix: str, namespace: str) -> Iterator[Endpoint]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                ns = namespace + (f"{pattern.namespace}:" if pattern.namespace else "")
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), ns)
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                if SUFFIX in route:
                    continue
                name = namespace + pattern.name if pattern.name else ""
                yield Endpoint(route=route, name=name, key=name or route, callback=pattern.callback)

    return list(walk(get_resolver().url_patterns, "", ""))


def rule_for(endpoint: Endpoint) -> Rule | None:
    return RULES.get(endpoint.key) or (ADMIN_SITE if endpoint.is_admin else None)


# --- coverage of the rule table -------------------------------------------------------------------------


def test_every_endpoint_has_a_rule() -> None:
    missing = []
    for endpoint in endpoints():
        rule = rule_for(endpoint)
        if rule is None:
            missing.append(f"{endpoint.key}  ({endpoint.route})")
            continue
        methods = endpoint.drf_methods()
        if methods is not None and not methods <= set(rule.methods):
            missing.append(f"{endpoint.key}: methods {sorted(methods - set(rule.methods))} have no policy")
    assert not missing, "Add a rule to tests/authz_rules.py for:\n" + "\n".join(missing)


def test_the_rule_table_names_only_existing_endpoints() -> None:
    keys = {e.key for e in endpoints()}
    stale = sorted(set(RULES) - keys)
    assert not stale, f"Rules for URLs that no longer exist: {stale}"


# --- the world ---------------------------------------------------------------------------------------


class World:
    """Two tenants, each with a job, a target, a failed run with an attempt, an alert, a next-run check,
    a handover with a residual exception and a problem linked to it, a ledger item and load; people of
    every role on the first ("own") tenant; an integration with a key; audit events about both tenants."""

    def __init__(self) -> None:
        self.users: dict[str, AbstractBaseUser] = {}
        self.objects: dict[tuple[str, str], Any] = {}
        admin = UserFactory(username="matrix-admin", admin=True)
        integration = integration_get_or_create(source="generic", name="matrix-generic")
        self.objects[("integration", "site")] = integration
        self.objects[("custom_integration", "site")] = integration_get_or_create(source="custom", name="matrix-custom")
        for scope, slug in (("own", "amberline"), ("other", "brightwater")):
            tenant = TenantFactory(slug=slug)
            target = JobTargetFactory(job=JobFactory(key=f"{slug}-export"), tenant=tenant)
            run = RunFactory(
                job=target.job,
                tenant=tenant,
                target=target,
                status="failed",
                window_start=datetime(2026, 11, 27, tzinfo=UTC),
                window_end=datetime(2026, 11, 28, tzinfo=UTC),
            )
            attempt = AttemptFactory(run=run, status="failed", execution_id=f"{slug}-exec-1")
            key = integration_key_create(integration=integration, tenants=[tenant]).record
            delivery = Delivery.objects.create(
                integration=integration,
                key=key,
                received_at=timezone.now(),
                size_bytes=2,
                sha256="0" * 64,
                body="{}",
                outcome=Delivery.Outcome.PROCESSED,
            )
            alert = Alert.objects.create(
                delivery=delivery,
                integration=integration,
                index=0,
                source="generic",
                dedup_hash=uuid.uuid4().hex,
                outcome=Alert.Outcome.ACCEPTED,
                run=run,
                attempt=attempt,
                job_key=target.job.key,
                tenant_slug=slug,
            )
            WorkItem.objects.create(run=run, record_id="INV-1001")
            load = WorkItemLoad.objects.create(
                run=run,
                kind=WorkItemLoad.Kind.POPULATION,
                status=WorkItemLoad.Status.FAILED,
                error="line 2: not a record id",
                created_by=admin,
                created_at=timezone.now(),
            )
            handover = handover_create(actor=admin, runs=[run])
            problem = problem_create(actor=admin, title=f"{slug} problem", handovers=[handover])
            exception = residual_exception_create(handover=handover, actor=admin, description="left over", run=run)
            check = NextRunCheckFactory(target=target)
            replay = ReplayRequest.objects.create(
                run=run,
                kind=ReplayRequest.Kind.ABSENT_ITEMS,
                reason="matrix",
                requested_by=admin,
                scope_fingerprint="0" * 64,
                eligible_approvers={"business": [], "technical": []},
                expires_at=timezone.now() + timedelta(days=1),
            )
            helper = UserFactory(username=f"{slug}-helper")
            role_grant(user=helper, role="business_owner", obj=tenant, actor=admin)  # an audit event about it
            for kind, obj in {
                "tenant": tenant,
                "job": target.job,
                "target": target,
                "run": run,
                "alert": alert,
                "load": load,
                "handover": handover,
                "problem": problem,
                "exception": exception,
                "check": check,
                "replay": replay,
                "key": key,
                "audit": AuditEvent.objects.filter(tenants=tenant).first(),
            }.items():
                self.objects[(kind, scope)] = obj
        own_tenant, own_job = self.obj("tenant", "own"), self.obj("job", "own")
        for role in ("support", "business_owner", "auditor"):
            self.users[role] = UserFactory(username=f"matrix-{role}")
            role_grant(user=self.users[role], role=role, obj=own_tenant)
        self.users["technical_owner"] = UserFactory(username="matrix-technical-owner")
        role_grant(user=self.users["technical_owner"], role="technical_owner", obj=own_job)
        self.users["nobody"] = UserFactory(username="matrix-nobody")
        self.users["admin"] = admin
        Group.objects.create(name="matrix-group")

    def obj(self, kind: str, scope: str) -> Any:
        for key in ((kind, scope), (kind, "own"), (kind, "site")):
            if key in self.objects:
                return self.objects[key]
        raise KeyError(kind)

    def url_kwargs(self, kind: str | None, scope: str) -> dict[str, str]:
        if kind is None:
            return {}
        obj = self.obj(kind, scope)
        if kind == "exception":
            return {"id": str(obj.handover.public_id), "exception_id": str(obj.public_id)}
        if kind == "load":
            return {"id": str(obj.run.public_id), "load_id": str(obj.public_id)}
        if kind == "audit":
            return {}
        return {"id": str(obj.public_id), "run_id": str(obj.public_id)}

    def marker(self, kind: str | None, scope: str) -> str:
        """What shows that the scope's object is listed: its public id (its tenant's slug for audit events)."""
        if kind == "audit":
            return self.obj("tenant", scope).slug
        return str(self.obj(kind, scope).public_id) if kind else ""


def build_path(endpoint: Endpoint, values: dict[str, str]) -> str:
    """Fill a route's parameters; admin URLs get placeholder ids (the admin site is staff-only whatever the id)."""
    route = endpoint.route
    if "(?P<app_label>" in route:
        return "/admin/runs/"
    if "(?P<url>" in route:
        return "/admin/no-such-page/"

    def fill(match: re.Match[str]) -> str:
        name = match.group(2)
        return values.get(name) or values.get("id") or "1"

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)


def classify(response: Any, marker: str) -> str:
    status = response.status_code
    if status >= 500:
        return f"server error {status}"
    if status == 405:
        return "405 method not allowed"
    if status in (301, 302) and response["Location"].split("?")[0].endswith(LOGIN_PATHS):
        return LOGIN.name
    if status == 401:
        return "LOGIN/KEY"
    if status == 403:
        return DENY.name
    if status == 404:
        return HIDE.name
    if marker and status == 200:
        return LISTED.name if marker in response.content.decode(errors="replace") else UNLISTED.name
    return OK.name


def matches(expected: Outcome, got: str) -> bool:
    if expected is ANY:
        return got not in (LOGIN.name, "LOGIN/KEY") and not got.startswith("server error")
    if expected in (LOGIN, KEY):
        return got in (expected.name, "LOGIN/KEY") and not (expected is KEY and got == LOGIN.name)
    return got == expected.name


@dataclass
class Case:
    endpoint: Endpoint
    rule: Rule
    method: str
    role: str
    scope: str


def cases() -> list[Case]:
    """Every (endpoint, method, role, scope) the rules describe (URLs without a rule fail the test above)."""
    found = []
    for endpoint in endpoints():
        rule = rule_for(endpoint)
        if rule is None:
            continue
        for method in rule.methods:
            for scope in ("site",) if rule.site else SCOPES:
                for role in rule.roles:
                    if role == "anon" and scope == "other":
                        continue  # anonymous people are sent to log in whatever the tenant
                    found.append(Case(endpoint, rule, method, role, scope))
    # admins last: their allowed actions change the world (a key revoked, a handover handed over)
    return sorted(found, key=lambda c: c.role == "admin")


def _request(client: Client, case: Case, world: World) -> Any:
    rule, endpoint, scope = case.rule, case.endpoint, case.scope
    values = world.url_kwargs(rule.obj, "own" if scope == "site" else scope)
    if rule.kwargs is not None:
        values.update(rule.kwargs(world, scope))
    path = build_path(endpoint, values)
    query = rule.query(world, scope) if rule.query else {}
    data = rule.data(world, scope) if rule.data else {}
    if case.method == "GET":
        return client.get(path, query)
    if query:
        path += "?" + urlencode(query)
    if rule.multipart:
        return client.post(path, data)
    if endpoint.is_api:
        body = json.dumps(data)
        return client.generic(case.method, path, body, content_type="application/json", QUERY_STRING="")
    return client.generic(
        case.method, path, urlencode(data, doseq=True), content_type="application/x-www-form-urlencoded"
    )


@pytest.mark.django_db
def test_authorisation_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    world = World()
    clients = {"anon": Client(raise_request_exception=False)}
    for role, user in world.users.items():
        clients[role] = Client(raise_request_exception=False)
        clients[role].force_login(user)
    all_cases = cases()
    failures = []
    tally: Counter[str] = Counter()
    for case in all_cases:
        expected = case.rule.methods[case.method](case.role, "own" if case.scope == "site" else case.scope)
        marker = world.marker(case.rule.obj, case.scope) if expected in (LISTED, UNLISTED) else ""
        client = clients[case.role]
        if case.rule.fresh_client and case.role != "anon":
            client = Client(raise_request_exception=False)
            client.force_login(world.users[case.role])
        response = _request(client, case, world)
        got = classify(response, marker)
        tally[expected.name] += 1
        if not matches(expected, got):
            failures.append(
                f"{case.method:6} {case.endpoint.key:48} {case.role:16} {case.scope:6} "
                f"expected {expected.name:9} got {got} ({response.status_code})"
            )
    urls = {c.endpoint.key for c in all_cases}
    with capsys.disabled():
        print(
            f"\nauthorisation matrix: {len(all_cases)} requests over {len(urls)} URLs "
            f"({sum(not c.endpoint.is_admin for c in all_cases)} outside the Django admin), "
            f"{len(ROLES)} roles x own/other tenant; expected outcomes: {dict(sorted(tally.items()))}"
        )
    assert not failures, f"{len(failures)} of {len(all_cases)} cases differ from the rules:\n" + "\n".join(failures)


@pytest.mark.django_db
def test_every_form_and_session_api_write_needs_a_csrf_token() -> None:
    """CSRF everywhere: a signed-in admin's POST/PATCH without the token is refused (403) on every URL
    that takes one, API included (DRF enforces CSRF for session authentication). Ingestion takes
    no session, so it answers 401 for want of a key instead."""
    world = World()
    refused, checked = [], 0
    for endpoint in endpoints():
        rule = rule_for(endpoint)
        if rule is None:
            continue
        for method in set(rule.methods) - {"GET"}:
            checked += 1
            case = Case(endpoint, rule, method, "admin", "site" if rule.site else "own")
            client = Client(enforce_csrf_checks=True, raise_request_exception=False)
            client.force_login(world.users["admin"])
            response = _request(client, case, world)
            expected = 401 if rule.methods[method] is key_only else 403
            if response.status_code != expected:
                refused.append(f"{method} {endpoint.key}: {response.status_code}")
    assert checked > 30
    assert not refused, "Writes accepted without a CSRF token:\n" + "\n".join(refused)
