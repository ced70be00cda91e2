"""Every page shows exactly the controls the person may use, for each of the five demo roles.

The demo (``manage.py load_demo``'s data) is read as ``support``, ``business-owner``, ``tech-owner``,
``auditor`` and ``admin``. On each main page (and the run page's HTMX fragments) every POST form in
``<main>`` and every link to an action page is a control, named by its URL. What a role may do comes
from the authorisation oracle (``tests/authz_rules.py``): the policy of the URL's POST (for forms the
service refuses, the policy it refuses with). A control is expected for a role exactly when the oracle
allows it, among the controls the page shows to anyone: a control a role may not use is missing, and
one it may use is there. A run that is ok (succeeded, nothing unresolved) offers no failure action.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import Resolver404, resolve, reverse

from approvals.replays.demo import demo_replay_load
from approvals.replays.models import ReplayRequest
from handover.handovers.demo import demo_handover_load
from handover.handovers.models import Handover
from runs.alerts.models import Alert
from runs.attempts.business_state import run_business_state, run_business_state_annotate
from runs.attempts.models import Run
from runs.catalog.models import Job
from runs.checks.models import NextRunCheck
from runs.demo.loader import DEMO_USERS, demo_load
from runs.permissions import APPROVER_PERMISSIONS
from tests.authz_rules import ANY, LISTED, OK, RULES

pytestmark = pytest.mark.django_db

# the demo's usernames -> the oracle's role names
ROLE_OF = {
    "support": "support",
    "business-owner": "business_owner",
    "tech-owner": "technical_owner",
    "auditor": "auditor",
    "admin": "admin",
}
# links that lead to an action's form: the action they lead to (URL name, method)
ACTION_LINKS = {
    "handover:job-pause": "POST",
    "handover:handover-new": "POST",
    "approvals:replay-create": "POST",
    "handover:handover-edit": "POST",
}
# what a run that is ok must not offer anyone
FAILURE_ACTIONS = {
    "handover:handover-new",
    "approvals:replay-create",
    "approvals:recovery-decision",
    "runs:work-item-load-create",
    "runs:run-failure-class",
}
# approving needs an approver's role held explicitly (rule 4; ``runs.permissions.APPROVER_PERMISSIONS``)
APPROVER_ROLES = {"business": "business_owner", "technical": "technical_owner"}


class Controls(HTMLParser):
    """The URL names of the POST forms and action links inside ``<main>`` (a fragment has no ``<main>``:
    all of it counts), and the navigation's links."""

    def __init__(self, fragment: bool) -> None:
        super().__init__()
        self.in_main = fragment
        self.in_nav = False
        self.found: set[str] = set()
        self.nav: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "main":
            self.in_main = True
        elif tag == "nav":
            self.in_nav = True
        elif tag == "form" and self.in_main and (a.get("method") or "").lower() == "post":
            self.found.add(_name(a.get("action") or ""))
        elif tag == "a" and a.get("href"):
            name = _name(a["href"] or "")
            if self.in_nav:
                self.nav.add(name)
            elif self.in_main and name in ACTION_LINKS:
                self.found.add(name)

    def handle_endtag(self, tag: str) -> None:
        if tag == "main":
            self.in_main = False
        elif tag == "nav":
            self.in_nav = False


def _name(url: str) -> str:
    try:
        return resolve(urlsplit(url).path).view_name
    except Resolver404:
        return f"unresolved:{url}"


def allowed(role: str, name: str) -> bool:
    """Whether the oracle lets ``role`` use the control ``name`` on its own tenant's objects."""
    if name in ("approvals:replay-approve", "approvals:replay-reject"):
        return role in {APPROVER_ROLES[kind] for kind in APPROVER_PERMISSIONS}
    policy = RULES[name].methods[ACTION_LINKS.get(name, "POST")]
    decide = getattr(policy, "service_policy", policy)  # a page form: the rule its service refuses with
    return decide(role, "own") in (OK, LISTED, ANY)


def _ok_run() -> Run:
    for run in run_business_state_annotate(Run.objects.filter(status=Run.Status.SUCCEEDED).order_by("pk")):
        if run_business_state(run).state == "ok":
            return run
    raise AssertionError("the demo has no run that is ok")


def _pages() -> dict[str, tuple[str, bool]]:
    """label -> (path, is an HTMX fragment)."""
    handover = Handover.objects.order_by("pk").first()
    replay = ReplayRequest.objects.order_by("pk").first()
    assert handover is not None and replay is not None
    failed = Run.objects.filter(handover_links__handover=handover).order_by("pk").first()
    runs = {"failed run": failed, "replayed run": replay.run, "ok run": _ok_run()}
    job = Job.objects.order_by("key").first()
    check = NextRunCheck.objects.order_by("pk").first()
    alert = Alert.objects.filter(outcome="unmatched", tenant_slug="acme-foods").order_by("pk").first() or (
        Alert.objects.filter(outcome="unmatched").order_by("pk").first()
    )
    assert failed is not None and job is not None and check is not None and alert is not None
    pages: dict[str, tuple[str, bool]] = {}
    for label, run in runs.items():
        pages[label] = (reverse("runs:run-detail", kwargs={"id": run.public_id}), False)
        pages[f"{label}: handover box"] = (reverse("handover:run-handover-box", kwargs={"id": run.public_id}), True)
        pages[f"{label}: replays"] = (reverse("approvals:run-replays", kwargs={"run_id": run.public_id}), True)
    pages.update(
        {
            "runs": ("/runs/", False),
            "inbox": ("/inbox/", False),
            "alert": (reverse("runs:alert-detail", kwargs={"id": alert.public_id}), False),
            "handovers": ("/handovers/", False),
            "handover": (reverse("handover:handover-detail", kwargs={"id": handover.public_id}), False),
            "replays": ("/replays/", False),
            "replay": (reverse("approvals:replay-detail", kwargs={"id": replay.public_id}), False),
            "checks": ("/checks/", False),
            "check": (reverse("runs:check-detail", kwargs={"id": check.public_id}), False),
            "jobs": ("/jobs/", False),
            "job": (reverse("runs:job-detail", kwargs={"id": job.public_id}), False),
        }
    )
    return pages


def test_each_role_sees_exactly_the_controls_it_may_use(settings: Any) -> None:
    settings.AXES_ENABLED = False
    demo_load()
    demo_handover_load()  # as manage.py load_demo does
    demo_replay_load()
    assert set(DEMO_USERS) == set(ROLE_OF)
    pages = _pages()
    seen: dict[tuple[str, str], set[str]] = {}
    nav: dict[str, set[str]] = {}
    for username in ROLE_OF:
        client = Client()
        client.force_login(get_user_model().objects.get(username=username))
        for label, (path, fragment) in pages.items():
            headers: dict[str, Any] = {"HTTP_HX_REQUEST": "true"} if fragment else {}
            response = client.get(path, **headers)
            if response.status_code == 404 and username != "admin":
                continue  # a page the person may not see (an unmatched alert of a job nobody owns)
            assert response.status_code == 200, (username, label, response.status_code)
            parser = Controls(fragment)
            parser.feed(response.content.decode())
            seen[(username, label)] = parser.found
            nav.setdefault(username, set()).update(parser.nav)

    wrong: dict[str, dict[str, list[str]]] = {}
    for label in pages:
        offered = set().union(*(found for (_, page), found in seen.items() if page == label))
        for username, role in ROLE_OF.items():
            if (username, label) not in seen:
                continue
            expected = {name for name in offered if allowed(role, name)}
            found = seen[(username, label)]
            if found != expected:
                wrong[f"{username} on {label}"] = {
                    "shown but not allowed": sorted(found - expected),
                    "allowed but missing": sorted(expected - found),
                }
    assert wrong == {}, json.dumps(wrong, indent=1)

    # the pages do offer controls: the failed run's whole recovery, to support
    assert {"approvals:replay-create", "approvals:recovery-decision", "handover:handover-new"} <= (
        seen[("support", "failed run: replays")] | seen[("support", "failed run: handover box")]
    ) or {"approvals:replay-create", "approvals:recovery-decision"} <= seen[("support", "failed run: replays")]
    assert "runs:work-item-load-create" in seen[("support", "failed run")] | seen[("support", "replayed run")]
    assert "handover:job-pause" in seen[("tech-owner", "job")] and "handover:job-pause" not in seen[("support", "job")]
    # an ok run offers no failure action, to anyone
    for username in ROLE_OF:
        shown = set().union(*(found for (who, page), found in seen.items() if who == username and "ok run" in page))
        assert not shown & FAILURE_ACTIONS, (username, shown & FAILURE_ACTIONS)
    # the audit trail is in the navigation of exactly those who may read it
    for username, role in ROLE_OF.items():
        assert ("manage:audit-list" in nav[username]) is (
            RULES["manage:audit-list"].methods["GET"](role, "own") is LISTED
        )
