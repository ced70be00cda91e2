"""The authorisation rule table: what every URL answers each role, on its own tenant and on another.

``tests/test_authz_matrix.py`` walks the URL conf and fails for any URL (and, for API views, any
HTTP method) without an entry here, so a new endpoint cannot ship without a rule. To add one:

    "app:name": Rule("run", GET=READ, POST=WRITE),

``obj`` names the world object whose ids fill the URL (``OBJECTS`` in the matrix test: its own
tenant's for the ``own`` scope, the other tenant's for ``other``); ``site=True`` for URLs that
belong to no tenant (each role is then tried once). Each method maps to a policy: a function of
(role, scope) returning the expected ``Outcome``. docs/architecture.md "Roles and permissions": an object a person may
not see answers 404 (HIDE); an action they may not take on an object they can see answers 403
(DENY); lists leave out what they may not see (LISTED / UNLISTED, checked by the object's id).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Outcome(Enum):
    OK = "allowed (2xx, 3xx to a page, 400, 409: anything but refused)"
    LOGIN = "sent to log in (HTML 302 to a login page; API 401)"
    DENY = "403"
    HIDE = "404"
    KEY = "401: needs an integration key or runner credential, whoever the person is"
    LISTED = "200 with the object listed"
    UNLISTED = "200 without the object"
    ANY = "in, whatever the page answers (the Django admin for admins: its own 403 and 404 included)"


OK, LOGIN, DENY, HIDE, KEY, LISTED, UNLISTED, ANY = (
    Outcome.OK,
    Outcome.LOGIN,
    Outcome.DENY,
    Outcome.HIDE,
    Outcome.KEY,
    Outcome.LISTED,
    Outcome.UNLISTED,
    Outcome.ANY,
)

ROLES = ("anon", "nobody", "support", "business_owner", "auditor", "technical_owner", "admin")
SCOPES = ("own", "other")
# roles that see the own tenant's runs (technical owner: through the own tenant's job)
READERS = frozenset({"support", "business_owner", "auditor", "technical_owner"})
# roles that write on the own tenant: handovers, ledger, checks (support and technical owner)
WRITERS = frozenset({"support", "technical_owner"})

Policy = Callable[[str, str], Outcome]


def public(role: str, scope: str) -> Outcome:
    return OK


def signed_in(role: str, scope: str) -> Outcome:
    return LOGIN if role == "anon" else OK


def key_only(role: str, scope: str) -> Outcome:
    return KEY


def to_login(role: str, scope: str) -> Outcome:
    """Logging out: everyone ends on the login page."""
    return LOGIN


def admin_logout(role: str, scope: str) -> Outcome:
    """Django's admin logout: admins land on the admin login, others on its plain logged-out redirect."""
    return LOGIN if role == "admin" else OK


def admin_site(role: str, scope: str) -> Outcome:
    """Django's admin: staff only; inside, Django answers as it does (read-only models' add pages: 403)."""
    return ANY if role == "admin" else LOGIN


def staff_page(role: str, scope: str) -> Outcome:
    """HTML for admins only: everyone else is sent to the admin login (``staff_member_required``)."""
    return OK if role == "admin" else LOGIN


def staff_api(role: str, scope: str) -> Outcome:
    """API for admins only: 401 without credentials, 403 for people who are not admins."""
    return LOGIN if role == "anon" else OK if role == "admin" else DENY


def on_tenant(act: frozenset[str]) -> Policy:
    """An object of a tenant: roles in ``act`` may do it; other readers see it but get 403; the rest 404.

    Admins may do everything; on the other tenant, nobody but admins sees anything.
    """

    def decide(role: str, scope: str) -> Outcome:
        if role == "anon":
            return LOGIN
        if role == "admin":
            return OK
        if scope == "other":
            return HIDE
        if role in act:
            return OK
        return DENY if role in READERS else HIDE

    return decide


READ = on_tenant(READERS)
WRITE = on_tenant(WRITERS)
REQUEST_REPLAY = on_tenant(frozenset({"support"}))  # support requests replays
PAUSE_JOB = on_tenant(frozenset({"technical_owner"}))  # a job-wide pause: its technical owner (and admins)
STAFF_ON_TENANT = on_tenant(frozenset())  # visible to readers, acted on by admins only
MANAGE_RUNNERS = on_tenant(frozenset({"technical_owner"}))  # a job's runner credentials: its owner and admins


def listing(policy: Policy) -> Policy:
    """A list: where ``policy`` allows reading the object it is listed, where it hides it it is not."""

    def decide(role: str, scope: str) -> Outcome:
        outcome = policy(role, scope)
        return {OK: LISTED, HIDE: UNLISTED, DENY: UNLISTED}.get(outcome, outcome)

    return decide


def audit_trail(role: str, scope: str) -> Outcome:
    """The audit trail: admins read all, auditors their tenants', everyone else is refused (403)."""
    if role == "anon":
        return LOGIN
    if role == "admin":
        return LISTED
    if role == "auditor":
        return LISTED if scope == "own" else UNLISTED
    return DENY


def someone_elses(role: str, scope: str) -> Outcome:
    """Another person's personal API token: nobody finds it on their own token pages, admins included (404)."""
    return LOGIN if role == "anon" else HIDE


def page_form(policy: Policy) -> Policy:
    """A form posted from a page whose refusals come back as messages on the page (a redirect): the
    service decides, the answer is a redirect for anyone who sees the object; 404 for everyone else."""

    def decide(role: str, scope: str) -> Outcome:
        outcome = policy(role, scope)
        return OK if outcome is DENY else outcome

    decide.service_policy = policy  # type: ignore[attr-defined]  # who may act (tests/test_controls_by_role.py)
    return decide


def target_form(role: str, scope: str) -> Outcome:
    """A form naming a target: a target the person may not see reads as "choose a target" (redirect)."""
    if role == "anon":
        return LOGIN
    if scope == "own" and role in READERS - WRITERS:
        return DENY
    return OK


@dataclass(frozen=True)
class Rule:
    obj: str | None = None
    site: bool = False
    methods: dict[str, Policy] = field(default_factory=dict)
    data: Callable[[Any, str], dict[str, Any]] | None = None  # (world, scope) -> request payload
    kwargs: Callable[[Any, str], dict[str, Any]] | None = None  # extra URL kwargs
    query: Callable[[Any, str], dict[str, Any]] | None = None  # (world, scope) -> query string
    fresh_client: bool = False  # the request ends the session (log out): use a client of its own
    multipart: bool = False  # send ``data`` as a multipart form (file uploads) rather than JSON
    # Only where the answer cannot depend on the person beyond these roles (public pages that are
    # slow to render; Django's admin, which checks nothing but is_staff): the roles to try.
    roles: tuple[str, ...] = ROLES

    @classmethod
    def of(cls, obj: str | None = None, *, site: bool = False, **options: Any) -> Rule:
        methods = {k: v for k, v in options.items() if k.isupper()}
        extra = {k: v for k, v in options.items() if not k.isupper()}
        return cls(obj=obj, site=site, methods=methods, **extra)


R = Rule.of


def _attempt(world: Any, scope: str) -> dict[str, Any]:
    """The scope's run's attempt (the matrix run has one)."""
    return {"attempt_id": str(world.obj("run", scope).attempts.get().public_id)}


def _target(world: Any, scope: str) -> dict[str, Any]:
    return {"target": str(world.obj("target", scope).public_id)}


def _target_id(world: Any, scope: str) -> dict[str, Any]:
    return {"target_id": str(world.obj("target", scope).public_id)}


def _team(world: Any, scope: str) -> dict[str, Any]:
    """A team owning the scope's job (teams grant nothing: its page shows to those who see that job)."""
    from django.utils import timezone

    from handover.notifications.models import Team
    from handover.ownership.models import JobOwnership

    team, _ = Team.objects.get_or_create(name=f"matrix-team-{scope}")
    JobOwnership.objects.update_or_create(
        job=world.obj("job", scope), defaults={"team": team, "set_at": timezone.now()}
    )
    return {"id": str(team.public_id)}


def _population_file(world: Any, scope: str) -> dict[str, Any]:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return {"population": SimpleUploadedFile("population.csv", b"record_id\nINV-1001\nINV-1002\n")}


def _replay_request(world: Any, scope: str) -> dict[str, Any]:
    return {"run": str(world.obj("run", scope).public_id), "kind": "absent_items", "reason": "matrix"}


def _recovery_decision(world: Any, scope: str) -> dict[str, Any]:
    return {"run": str(world.obj("run", scope).public_id), "decision": "wait_for_retry", "note": "matrix"}


def _runs(world: Any, scope: str) -> dict[str, Any]:
    return {"runs": [str(world.obj("run", scope).public_id)]}


def _token_create(world: Any, scope: str) -> dict[str, Any]:
    return {"label": "matrix script", "expires_in_days": 7}


def _runner_credential(world: Any, scope: str) -> dict[str, Any]:
    """The prefix of a runner credential of the scope's job (made once per world and scope)."""
    from runs.catalog.services import runner_credential_create

    key = ("runner_credential", scope)
    if key not in world.objects:
        world.objects[key] = runner_credential_create(job=world.obj("job", scope), label="matrix")[0]
    return {"prefix": world.objects[key].prefix}


def _random_id(world: Any, scope: str) -> dict[str, Any]:
    """An id nobody's row has (a chat/push target of someone else reads the same: 404)."""
    return {"id": "00000000-0000-4000-8000-000000000000"}


def _foreign_token(world: Any, scope: str) -> dict[str, Any]:
    """The prefix of a token held by a person outside the matrix's roles (made once per world)."""
    from knox.models import AuthToken

    from tests.factories import UserFactory

    key = ("api_token", "site")
    if key not in world.objects:
        world.objects[key] = AuthToken.objects.create(user=UserFactory(username="matrix-token-owner"))[0]
    return {"prefix": world.objects[key].token_key}


def _problem_create(world: Any, scope: str) -> dict[str, Any]:
    return {"title": "matrix problem", "handovers": [str(world.obj("handover", scope).public_id)]}


def _handover_of(world: Any, scope: str) -> dict[str, Any]:
    return {"handover": str(world.obj("handover", scope).public_id)}


def _problem_of(world: Any, scope: str) -> dict[str, Any]:
    return {"problem": str(world.obj("problem", scope).public_id)}


def _extra_linked_handover(world: Any, scope: str) -> Any:
    """A fresh handover of the scope's target, linked to the scope's problem (one per request: an unlink
    that succeeds takes it away, never the problem's own link)."""
    from datetime import timedelta

    from handover.handovers.services import handover_create
    from handover.problems.services import problem_link_handover
    from tests.factories import RunFactory

    count = world.objects.setdefault(("extra_handovers", scope), [0])
    count[0] += 1
    target, admin = world.obj("target", scope), world.users["admin"]
    base = world.obj("run", scope)
    run = RunFactory(
        job=target.job,
        tenant=target.tenant,
        target=target,
        status="failed",
        window_start=base.window_start + timedelta(days=count[0]),
        window_end=base.window_end + timedelta(days=count[0]),
    )
    handover = handover_create(actor=admin, runs=[run])
    problem_link_handover(problem=world.obj("problem", scope), handover=handover, actor=admin)
    return handover


def _unlink_kwargs(world: Any, scope: str) -> dict[str, Any]:
    return {"handover_id": str(_extra_linked_handover(world, scope).public_id)}


def _unlink_form(world: Any, scope: str) -> dict[str, Any]:
    return {"handover": str(_extra_linked_handover(world, scope).public_id)}


# Django's admin site, one wildcard entry: staff only, whatever the model. Django's admin looks at
# is_staff alone, so a person without roles and one with a tenant role stand for every non-staff role.
ADMIN_SITE = R(site=True, GET=admin_site, roles=("anon", "nobody", "support", "admin"))
PUBLIC_ROLES = ("anon", "nobody", "admin")


def _failed_delivery(world: Any) -> dict[str, Any]:
    """A fresh ``failed`` post of the world's integration for each request (an admin's reprocess
    finishes the one it is given)."""
    from django.utils import timezone

    from runs.alerts.models import Delivery

    key = world.obj("key", "own")
    delivery = Delivery.objects.create(
        integration=key.integration,
        key=key,
        received_at=timezone.now(),
        size_bytes=2,
        sha256="0" * 64,
        body="{}",
        outcome=Delivery.Outcome.FAILED,
        try_count=5,
    )
    return {"id": str(delivery.public_id)}


RULES: dict[str, Rule] = {
    # --- site pages ----------------------------------------------------------------------------------
    "home": R(site=True, GET=public),
    "login": R(site=True, GET=public, POST=public),
    "logout": R(site=True, POST=to_login, fresh_client=True),
    "preferences": R(site=True, GET=signed_in, POST=signed_in),
    "healthz": R(site=True, GET=public),
    "api-schema": R(site=True, GET=public, roles=PUBLIC_ROLES),
    "api-docs": R(site=True, GET=public, roles=PUBLIC_ROLES),
    "api-root": R(site=True, GET=public, roles=PUBLIC_ROLES),
    # the admin site's own login and logout (every other admin URL: ADMIN_SITE)
    "admin:login": R(site=True, GET=public),
    "admin:logout": R(site=True, POST=admin_logout, fresh_client=True),
    # --- runs API --------------------------------------------------------------------------------------
    "runs-api:run-list": R("run", GET=listing(READ)),
    "runs-api:run-detail": R("run", GET=READ),
    "runs-api:job-list": R("job", GET=listing(READ)),
    "runs-api:job-detail": R("job", GET=READ),
    "runs-api:alert-list": R("alert", GET=listing(READ)),
    "runs-api:alert-detail": R("alert", GET=READ),
    "runs-api:alert-reprocess": R("alert", POST=STAFF_ON_TENANT),
    "runs-api:alert-ingest": R(site=True, POST=key_only, kwargs=lambda w, s: {"source": "generic"}),
    # the URL carries the key: a made-up one is refused whoever the person is
    "runs-api:alert-ingest-url-key": R(
        site=True, GET=key_only, POST=key_only, kwargs=lambda w, s: {"source": "generic", "key": "hu_" + "x" * 43}
    ),
    "runs-api:integration-list": R(site=True, GET=staff_api, POST=staff_api),
    "runs-api:integration-detail": R("integration", site=True, GET=staff_api, PATCH=staff_api),
    "runs-api:check-list": R("check", GET=listing(READ), POST=target_form, data=_target),
    "runs-api:check-detail": R("check", GET=READ),
    "runs-api:check-confirm": R("check", POST=WRITE),
    "runs-api:check-waive": R("check", POST=WRITE),
    "runs-api:audit-event-list": R("audit", GET=audit_trail),
    # --- work ledger API ------------------------------------------------------------------------------
    "runs-api:work-item-list": R("run", GET=READ),
    "runs-api:run-ledger": R("run", GET=READ),
    "runs-api:work-item-change-list": R("run", GET=READ),
    "runs-api:work-item-change": R(
        "run", POST=WRITE, data=lambda w, s: {"record_id": "INV-1001", "outcome": "absent", "note": "by hand"}
    ),
    "runs-api:work-item-verify": R("run", POST=WRITE, data=lambda w, s: {"record_id": "INV-1001", "found": False}),
    "runs-api:run-failure-class-confirm": R("run", POST=WRITE, data=lambda w, s: {"failure_class": "undetermined"}),
    "runs-api:run-attempt-explain-duplicate": R(
        "run", POST=WRITE, kwargs=_attempt, data=lambda w, s: {"reason": "matrix", "evidence_ref": "M-1"}
    ),
    "runs-api:run-attempt-abandon": R("run", POST=WRITE, kwargs=_attempt, data=lambda w, s: {"reason": "matrix"}),
    "runs-api:run-attempt-replace-slot": R(
        "run", POST=WRITE, kwargs=_attempt, data=lambda w, s: {"slot": "2026-11-29T01:00:00Z", "reason": "matrix"}
    ),
    "runs-api:work-item-load-list": R("run", GET=READ, POST=WRITE, multipart=True, data=_population_file),
    "runs-api:work-item-load-detail": R("load", GET=READ),
    "runs-api:work-item-load-retry": R("load", POST=WRITE),
    "runs-api:work-item-load-confirm": R(
        "load", POST=WRITE, data=lambda w, s: {"reason": "matrix", "ledger_version": 0}
    ),
    "runs-api:work-item-load-discard": R("load", POST=WRITE, data=lambda w, s: {"reason": "matrix"}),
    "runs-api:work-item-duplicate-explain": R(
        "run", POST=WRITE, data=lambda w, s: {"record_id": "INV-1001", "reason": "matrix", "evidence_ref": "M-1"}
    ),
    "runs-api:work-item-search": R("run", GET=listing(READ), query=lambda w, s: {"record_id": "INV-1001"}),
    "runs-api:integration-mapping": R("custom_integration", site=True, GET=staff_api, PUT=staff_api),
    "runs-api:integration-keys": R("integration", site=True, POST=staff_api),
    "runs-api:integration-transport": R("integration", site=True, POST=staff_api),
    "runs-api:integration-conventions": R("integration", site=True, POST=staff_api),
    "runs-api:integration-refused-requests": R(site=True, GET=staff_api),
    "runs-api:source-list": R(site=True, GET=staff_api),
    "runs-api:source-detail": R(site=True, GET=staff_api, kwargs=lambda w, s: {"source": "alertmanager"}),
    "runs-api:integration-catalogue": R(site=True, GET=staff_api),
    "runs-api:integration-catalogue-entry": R(
        site=True, GET=staff_api, kwargs=lambda w, s: {"name": "github-actions-workflow-run"}
    ),
    "runs-api:integration-reprocess": R("integration", site=True, POST=staff_api),
    "runs-api:integration-test": R("integration", site=True, POST=staff_api),
    # --- replays (approvals) API: people; the runner's routes take a runner credential ---------------
    "approvals-api:replay-claimable": R(site=True, GET=key_only),
    "approvals-api:replay-claim": R("replay", site=True, POST=key_only),
    "approvals-api:replay-runner-report": R("replay", site=True, POST=key_only),
    "approvals-api:replay-list": R("replay", GET=listing(READ), POST=REQUEST_REPLAY, data=_replay_request),
    "approvals-api:replay-queue": R(site=True, GET=signed_in),
    # recurrence and supportability: every signed-in person reads, counting only the runs they may see
    "approvals-api:recurrence": R(site=True, GET=signed_in),
    "approvals-api:supportability": R(site=True, GET=signed_in),
    "approvals-api:replay-reauthenticate": R(site=True, POST=signed_in),
    "approvals-api:replay-recovery-decisions": R("run", POST=WRITE, data=_recovery_decision),
    "approvals-api:replay-detail": R("replay", GET=READ),
    "approvals-api:replay-items": R("replay", GET=READ),
    "approvals-api:replay-approve": R("replay", POST=READ),
    "approvals-api:replay-reject": R("replay", POST=READ),
    "approvals-api:replay-cancel": R("replay", POST=WRITE, data=lambda w, s: {"reason": "matrix"}),
    "approvals-api:replay-dispatch": R("replay", POST=WRITE),
    "approvals-api:replay-scope": R("replay", POST=WRITE),
    "approvals-api:replay-settle": R("replay", POST=WRITE, data=lambda w, s: {"outcome": "failed", "reason": "matrix"}),
    # --- handover API --------------------------------------------------------------------------------
    "handover-api:handover-list": R("handover", GET=listing(READ), POST=WRITE, data=_runs),
    "handover-api:handover-detail": R("handover", GET=READ, PATCH=WRITE),
    "handover-api:handover-close": R("handover", POST=WRITE),
    "handover-api:handover-hand-over": R("handover", POST=WRITE),
    "handover-api:handover-markdown": R("handover", GET=READ),
    "handover-api:handover-refresh": R("handover", POST=WRITE),
    "handover-api:handover-reopen": R("handover", POST=WRITE),
    "handover-api:handover-start-recovery": R("handover", POST=WRITE),
    "handover-api:handover-verify": R("handover", POST=WRITE),
    "handover-api:handover-revisions": R("handover", GET=READ),
    "handover-api:handover-residual-exceptions": R("handover", POST=WRITE),
    "handover-api:handover-residual-exception-detail": R("exception", PATCH=WRITE),
    # --- problems API (docs/problems.md): readers of a linked tenant see, support/technical owners act --------
    "handover-api:problem-list": R("problem", GET=listing(READ), POST=WRITE, data=_problem_create),
    "handover-api:problem-detail": R("problem", GET=READ, PATCH=WRITE),
    "handover-api:problem-transition": R("problem", POST=WRITE, data=lambda w, s: {"action": "start_fix"}),
    "handover-api:problem-handovers": R("problem", POST=WRITE, data=_handover_of),
    "handover-api:problem-handover-detail": R("problem", DELETE=WRITE, kwargs=_unlink_kwargs),
    "handover-api:problem-markdown": R("problem", GET=READ),
    "handover-api:job-pause": R("job", POST=PAUSE_JOB),
    "handover-api:job-resume": R("job", POST=PAUSE_JOB),
    # ownership of aged work: readers of the job see it, its technical owners (and admins) change it
    "handover-api:job-ownership": R("job", GET=READ, PATCH=MANAGE_RUNNERS),
    "handover-api:target-ownership": R("job", GET=READ, PATCH=MANAGE_RUNNERS, kwargs=_target_id),
    # aged work: a list of what the caller may see (visibility checked by the ownership tests)
    "handover-api:aged-work-list": R(site=True, GET=signed_in),
    # a target (its tenant's part of the job): support on the tenant or the job's technical owner
    "handover-api:target-pause": R("target", POST=WRITE, data=lambda w, s: {"reason": "matrix"}),
    "handover-api:target-resume": R("target", POST=WRITE),
    "runs-api:runner-credential-list": R("job", GET=MANAGE_RUNNERS, POST=MANAGE_RUNNERS),
    "runs-api:runner-credential-detail": R("job", DELETE=MANAGE_RUNNERS, kwargs=_runner_credential),
    # the caller's own personal API tokens: anyone signed in, only their own
    "handover-api:api-token-list": R(site=True, GET=signed_in, POST=signed_in, data=_token_create),
    "handover-api:api-token-detail": R(site=True, DELETE=someone_elses, kwargs=_foreign_token),
    # the caller's own notifications: anyone signed in, only their own
    "handover-api:notification-list": R(site=True, GET=signed_in),
    "handover-api:notification-unread-count": R(site=True, GET=signed_in),
    "handover-api:notification-read": R(site=True, POST=signed_in),
    "handover:notification-list": R(site=True, GET=signed_in),
    "handover:notification-read": R(site=True, POST=signed_in),
    "handover:profile": R(site=True, GET=signed_in),
    "handover:profile-email": R(site=True, POST=signed_in),
    "handover:profile-email-verify": R(site=True, GET=signed_in, kwargs=lambda w, s: {"token": "not-a-token"}),
    "handover:profile-time-zone": R(site=True, POST=signed_in),
    "handover:profile-preferences": R(site=True, POST=signed_in),
    "handover:profile-target-add": R(site=True, POST=signed_in),
    "handover:profile-target-delete": R(site=True, POST=someone_elses, kwargs=_random_id),
    "handover:profile-target-test": R(site=True, POST=someone_elses, kwargs=_random_id),
    # --- runs pages ----------------------------------------------------------------------------------
    "runs:run-list": R("run", GET=listing(READ)),
    "runs:run-detail": R("run", GET=READ),
    "runs:alert-inbox": R("alert", GET=listing(READ)),
    "runs:alert-detail": R("alert", GET=READ),
    "runs:alert-reprocess": R("alert", POST=staff_page),
    "runs:alert-ignore": R("alert", POST=staff_page),
    "runs:delivery-reprocess": R(site=True, POST=staff_page, kwargs=lambda w, s: _failed_delivery(w)),
    "runs:integration-list": R(site=True, GET=staff_page),
    "runs:integration-detail": R("integration", site=True, GET=staff_page),
    "runs:source-list": R(site=True, GET=staff_page),
    "runs:source-detail": R(site=True, GET=staff_page, kwargs=lambda w, s: {"source": "alertmanager"}),
    "runs:check-list": R("check", GET=listing(READ)),
    "runs:check-create": R("target", POST=target_form, data=_target),
    "runs:check-detail": R("check", GET=READ),
    "runs:check-waive": R("check", POST=WRITE),
    "runs:check-confirm": R("check", POST=WRITE),
    "runs:job-list": R("job", GET=listing(READ)),
    "runs:job-detail": R("job", GET=READ),
    "runs:runner-credential-create": R("job", POST=MANAGE_RUNNERS),
    "runs:runner-credential-revoke": R("job", POST=MANAGE_RUNNERS, kwargs=_runner_credential),
    "runs:work-item-load-create": R("run", POST=WRITE),
    "runs:work-item-load-progress": R("load", GET=READ),
    "runs:work-item-load-confirm": R("load", POST=WRITE),
    "runs:work-item-load-discard": R("load", POST=WRITE),
    "runs:work-item-load-preview": R("load", GET=READ),
    "runs:work-item-duplicate-explain": R("run", POST=WRITE),
    "runs:work-item-change": R("run", POST=WRITE),
    "runs:work-item-verify": R("run", POST=WRITE),
    "runs:run-failure-class": R("run", POST=WRITE),
    "runs:attempt-explain-duplicate": R("run", POST=WRITE, kwargs=_attempt),
    "runs:attempt-replace-slot": R("run", POST=WRITE, kwargs=_attempt),
    "runs:run-explain-refire": R("run", POST=WRITE),
    "runs:run-explain-conflicting-report": R("run", POST=WRITE),
    "runs:work-item-search": R("run", GET=listing(READ), query=lambda w, s: {"record_id": "INV-1001"}),
    "runs:integration-create": R(site=True, GET=staff_page, POST=staff_page),
    "runs:integration-key-create": R("integration", site=True, GET=staff_page, POST=staff_page),
    "runs:integration-transport": R("integration", site=True, POST=staff_page),
    "runs:integration-conventions": R("integration", site=True, POST=staff_page),
    "runs:integration-mapping": R("custom_integration", site=True, GET=staff_page, POST=staff_page),
    "runs:integration-mapping-export": R("custom_integration", site=True, GET=staff_page),
    "runs:integration-reprocess": R("integration", site=True, POST=staff_page),
    # --- replay pages (approvals) --------------------------------------------------------------------
    "approvals:replay-list": R(site=True, GET=signed_in),
    "approvals:recurrence": R(site=True, GET=signed_in),
    "approvals:supportability": R(site=True, GET=signed_in),
    "approvals:supportability-export": R(site=True, GET=signed_in),
    "approvals:replay-detail": R("replay", GET=READ),
    "approvals:replay-approve": R("replay", POST=page_form(READ)),
    "approvals:replay-reject": R("replay", POST=page_form(READ)),
    "approvals:replay-cancel": R("replay", POST=page_form(WRITE)),
    "approvals:replay-dispatch": R("replay", POST=page_form(WRITE)),
    "approvals:replay-settle": R("replay", POST=page_form(WRITE)),
    "approvals:run-replays": R("run", GET=READ),
    "approvals:replay-create": R("run", GET=READ, POST=page_form(REQUEST_REPLAY)),
    "approvals:recovery-decision": R("run", POST=page_form(WRITE)),
    # --- handover pages ------------------------------------------------------------------------------
    "handover:handover-list": R("handover", GET=listing(READ)),
    "handover:handover-mine": R(site=True, GET=signed_in),
    "handover:attention": R(site=True, GET=signed_in),
    "handover:handover-new": R(
        "run", GET=READ, POST=WRITE, data=_runs, query=lambda w, s: {"run": str(w.obj("run", s).public_id)}
    ),
    "handover:handover-detail": R("handover", GET=READ),
    "handover:handover-edit": R("handover", GET=WRITE, POST=WRITE),
    "handover:handover-print": R("handover", GET=READ),
    "handover:handover-markdown": R("handover", GET=READ),
    "handover:handover-history": R("handover", GET=READ),
    "handover:handover-generated-diff": R("handover", GET=READ),
    "handover:handover-action": R("handover", POST=WRITE, kwargs=lambda w, s: {"action": "hand-over"}),
    "handover:residual-exception-add": R("handover", POST=WRITE),
    "handover:residual-exception-edit": R("exception", POST=WRITE),
    "handover:run-handover-box": R("run", GET=READ),
    "handover:handover-problem-link": R("handover", POST=WRITE, data=_problem_of),
    # --- problem pages ---------------------------------------------------------------------------------
    "handover:problem-list": R("problem", GET=listing(READ)),
    "handover:problem-export": R("problem", GET=listing(READ)),
    "handover:problem-new": R(
        "handover",
        GET=WRITE,
        POST=WRITE,
        query=_handover_of,
        data=lambda w, s: {"title": "matrix problem", "clean_runs_required": 3},
    ),
    "handover:problem-detail": R("problem", GET=READ),
    "handover:problem-edit": R("problem", POST=WRITE, data=lambda w, s: {"title": "matrix", "clean_runs_required": 3}),
    "handover:problem-transition": R("problem", POST=WRITE, data=lambda w, s: {"action": "start_fix"}),
    "handover:problem-unlink": R("problem", POST=WRITE, data=_unlink_form),
    "handover:problem-markdown": R("problem", GET=READ),
    "handover:job-pause": R("job", POST=PAUSE_JOB),
    "handover:job-resume": R("job", POST=PAUSE_JOB),
    "handover:job-ownership": R("job", GET=READ, POST=page_form(MANAGE_RUNNERS)),
    "handover:team-detail": R("job", GET=READ, kwargs=_team),
    "handover:aged-work-mine": R(site=True, GET=signed_in),
    "handover:target-pause": R("target", POST=WRITE, data=lambda w, s: {"target-reason": "matrix"}),
    "handover:target-resume": R("target", POST=WRITE),
    "handover:api-token-list": R(site=True, GET=signed_in),
    "handover:api-token-create": R(site=True, POST=signed_in, data=_token_create),
    "handover:api-token-revoke": R(site=True, GET=someone_elses, POST=someone_elses, kwargs=_foreign_token),
    # --- admin pages (/manage/) and the audit trail -------------------------------------------------
    "manage:role-list": R(site=True, GET=staff_page),
    "manage:role-grant": R(site=True, POST=staff_page),
    "manage:role-revoke": R(site=True, POST=staff_page),
    "manage:key-list": R(site=True, GET=staff_page),
    "manage:key-create": R(site=True, POST=staff_page),
    "manage:key-rotate": R("key", site=True, POST=staff_page),
    "manage:key-revoke": R("key", site=True, POST=staff_page),
    "manage:integration-security": R("integration", site=True, GET=staff_page, POST=staff_page),
    "manage:audit-list": R("audit", GET=audit_trail),
}
