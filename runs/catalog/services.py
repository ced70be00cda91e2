"""Tenants, jobs, targets, integrations, keys and roles: what an admin sets up."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from guardian.shortcuts import assign_perm, remove_perm

from handover.core.errors import Conflict, DomainError, Forbidden, NotFound
from handover.core.people import Person
from runs.alerts.parsers.registry import get_adapter
from runs.audit.services import audit_actor, audit_key_change, audit_record
from runs.catalog.authentication import generate_secret
from runs.catalog.models import (
    Integration,
    IntegrationKey,
    Job,
    JobTarget,
    RunnerCredential,
    Tenant,
    key_unrevoked_at,
    normalise_slug,
)
from runs.catalog.selectors import job_list_visible
from runs.permissions import may_manage_runner_credentials

# role name -> (model, permission codename). Groups are only bundles; these are checked per object.
TENANT_ROLES = {
    "support": "runs.act_as_support",
    "business_owner": "runs.act_as_business_owner",
    "auditor": "runs.act_as_auditor",
}
JOB_ROLES = {"technical_owner": "runs.act_as_technical_owner"}


def tenant_create(*, slug: str, name: str = "") -> Tenant:
    """Create a tenant; the slug is NFC-normalised and unique case-insensitively.

    Raises ``Conflict`` when a tenant with the same casefolded slug exists.
    """
    slug = normalise_slug(slug)
    if Tenant.objects.filter(slug_key=slug.casefold()).exists():
        raise Conflict(f"A tenant with the slug {slug!r} already exists (slugs ignore case).")
    return Tenant.objects.create(slug=slug, name=name or slug)


def tenant_get_or_create(*, slug: str, name: str = "") -> tuple[Tenant, bool]:
    """Return the tenant with this slug (case-insensitive), creating it when missing."""
    slug = normalise_slug(slug)
    existing = Tenant.objects.filter(slug_key=slug.casefold()).first()
    if existing is not None:
        return existing, False
    return tenant_create(slug=slug, name=name), True


def job_get_or_create(*, key: str, defaults: dict[str, Any]) -> tuple[Job, bool]:
    """Return the job with ``key``, creating it with ``defaults`` (schedule, timezone, ...) when missing.

    A new job is validated before it is written (``Job.full_clean``: field rules and
    ``schedule_validate`` -- cron, zone, never-fires, alignment against the schedule's shortest gap,
    DST ``both``). Raises Django's ValidationError keyed by field, and writes nothing, when it fails.
    """
    existing = Job.objects.filter(key=key).first()
    if existing is not None:
        return existing, False
    job = Job(key=key, **defaults)
    job.full_clean(validate_unique=False)
    try:
        with transaction.atomic():
            job.save()
    except IntegrityError:  # a concurrent caller created it first: theirs is the job
        return Job.objects.get(key=key), False
    return job, True


def job_target_get_or_create(
    *, job: Job, tenant: Tenant, environment: str = "prod", defaults: dict[str, Any] | None = None
) -> tuple[JobTarget, bool]:
    """Return the (job, tenant, environment) target, creating an active one (with ``defaults``) when missing.

    A new target is validated before it is written: the environment is a slug (``environment_is_valid``)
    and its overrides fit the job (``schedule_validate``). Raises Django's ValidationError keyed by
    field, and writes nothing, when it fails.
    """
    existing = JobTarget.objects.filter(job=job, tenant=tenant, environment=environment).first()
    if existing is not None:
        return existing, False
    target = JobTarget(job=job, tenant=tenant, environment=environment, **(defaults or {}))
    target.full_clean(validate_unique=False)
    try:
        with transaction.atomic():
            target.save()
    except IntegrityError:  # a concurrent caller created it first
        return JobTarget.objects.get(job=job, tenant=tenant, environment=environment), False
    return target, True


def integration_get_or_create(*, source: str, name: str = "", settings: dict[str, Any] | None = None) -> Integration:
    """Return the integration named ``name`` (default: the source slug), creating it with default settings.

    Raises ``DomainError`` for a source without an adapter.
    """
    if get_adapter(source) is None:
        raise DomainError(f"There is no adapter for the source {source!r}.")
    integration, _ = Integration.objects.get_or_create(
        name=name or source, defaults={"source": source, "settings": settings or {}}
    )
    if integration.source != source:
        raise Conflict(f"The integration {integration.name!r} is for {integration.source}, not {source}.")
    return integration


@dataclass(frozen=True)
class IssuedKey:
    """A new key: ``key`` is the secret, shown once and never stored."""

    record: IntegrationKey
    key: str


def integration_key_create(
    *,
    integration: Integration,
    tenants: Iterable[Tenant] = (),
    all_tenants: bool = False,
    created_by: Person | None = None,
    label: str = "",
    action: str = "key_create",
    kind: str = IntegrationKey.Kind.HEADER,
) -> IssuedKey:
    """Issue a key bound to ``integration`` and to ``tenants`` (or, by explicit choice, all tenants).

    ``kind``: ``header`` (``hk_…``, sent as ``Authorization: Bearer``) or ``url`` (``hu_…``, the path
    segment of ``/api/v1/alerts/<source>/k/<key>/``; ingest-only, like every integration key).
    Raises ``DomainError`` when neither tenants nor ``all_tenants`` is given, or for another kind.
    """
    if kind not in IntegrationKey.Kind.values:
        raise DomainError(f"A key is a header key or a URL key, not {kind!r}.")
    tenant_list = list(tenants)
    if not tenant_list and not all_tenants:
        raise DomainError("Bind the key to at least one tenant, or choose all tenants explicitly.")
    secret = generate_secret("hu" if kind == IntegrationKey.Kind.URL else "hk")
    with transaction.atomic():
        record = IntegrationKey.objects.create(
            integration=integration,
            kind=kind,
            label=label,
            prefix=secret.prefix,
            secret_hash=secret.secret_hash,
            all_tenants=all_tenants,
            created_by=created_by,
        )
        if tenant_list:
            record.tenants.set(tenant_list)
        # ``action`` is ``key_rotate`` when the key replaces another (runs.catalog.keys).
        audit_key_change(key=record, actor=created_by, action=action)
    return IssuedKey(record=record, key=secret.key)


def integration_key_url(*, source: str, key: str, base_url: str | None = None) -> str:
    """The full ingestion address of a URL key: ``<base>/api/v1/alerts/<source>/k/<key>/``.

    ``base_url`` defaults to ``HANDOVER_BASE_URL``; a request's own ``build_absolute_uri('/')`` may be
    given instead (the page and API answer the address the admin reached them by).
    """
    base = (base_url if base_url is not None else django_settings.HANDOVER_BASE_URL).rstrip("/")
    return base + reverse("runs-api:alert-ingest-url-key", kwargs={"source": source, "key": key})


def integration_key_revoke(
    *, key: IntegrationKey, actor: Person | None = None, at: datetime | None = None
) -> IntegrationKey:
    """Revoke a key now, or at ``at`` (UTC; a rotation's grace period); from then posts with it get 401.

    Revoking now is immediate whatever the grace: a key whose revocation time is still in the future
    (a rotation's grace period) is revoked now too, so a post that starts after this commits is refused.
    Idempotent: a key already revoked at or before the wanted time keeps its time and nothing is
    recorded. Side effects: the key's ``revoked_at``; an AuditEvent (``key_revoke``) attributed to
    ``actor``, also when only the grace is cut short.
    """
    when = at or timezone.now()
    with transaction.atomic():
        before = IntegrationKey.objects.filter(pk=key.pk).values_list("revoked_at", flat=True).first()
        # null, or later than wanted (in a grace period): a guarded UPDATE, so two revokes record one event
        changed = (
            IntegrationKey.objects.filter(pk=key.pk)
            .filter(key_unrevoked_at(when))
            .update(revoked_at=when, updated_at=timezone.now())
        )
        key.refresh_from_db()
        if changed:
            audit_key_change(key=key, actor=actor, action="key_revoke", grace_ended_at=before)
    return key


def runner_credential_require_manager(*, actor: Person, job: Job) -> None:
    """Refuse unless ``actor`` may manage ``job``'s runner credentials; return None when they may.

    The rule is ``runs.permissions.may_manage_runner_credentials`` (admins, the job's technical
    owners). Raises NotFound (404) for a job the person may not see, Forbidden (403) for one they may
    only read. ``runner_credential_create``/``_revoke`` call it for a person; pages and the API call it
    before they read a body or list the credentials.
    """
    if may_manage_runner_credentials(user=actor, job=job):
        return
    if not job_list_visible(user=actor).filter(pk=job.pk).exists():
        raise NotFound("No such job.")
    raise Forbidden("Only an admin or a technical owner of the job manages its runner credentials.")


def runner_credential_create(
    *, job: Job, created_by: Person | None = None, label: str = ""
) -> tuple[RunnerCredential, str]:
    """Issue a runner credential for ``job``; returns the row and the secret (``rc_…``, shown once).

    Only the SHA-256 of the secret and its 12-character prefix are stored (docs/security.md "Keys and
    tokens"). Side effects, in one transaction: the RunnerCredential row and an AuditEvent
    (``runner_credential_create``, by prefix only) attributed to ``created_by`` (None: the system).
    Refuses a person who may not manage the job's credentials (``runner_credential_require_manager``:
    NotFound 404 / Forbidden 403).
    """
    if created_by is not None:
        runner_credential_require_manager(actor=created_by, job=job)
    secret = generate_secret("rc")
    with transaction.atomic():
        record = RunnerCredential.objects.create(
            job=job, label=label[:100], prefix=secret.prefix, secret_hash=secret.secret_hash, created_by=created_by
        )
        audit_record(
            actor=created_by,
            action="runner_credential_create",
            summary=f"Runner credential {record.prefix}… issued for job {job.key}"
            + (f" ({record.label})" if record.label else ""),
            job=job,
            obj=record,
            data={"job": job.key, "prefix": record.prefix, "label": record.label},
        )
    return record, secret.key


def runner_credential_revoke(*, credential: RunnerCredential, actor: Person | None = None) -> RunnerCredential:
    """Revoke a runner credential now: from then its claims and reports answer 401.

    Idempotent: a credential already revoked keeps its time and nothing is recorded. Side effects: the
    row's ``revoked_at`` (a guarded UPDATE, so two revokes record one event) and an AuditEvent
    (``runner_credential_revoke``) attributed to ``actor``. A lease the credential holds is left to
    lapse (the replay sweep makes its dispatch ``unknown`` for a person to decide). Refuses a person
    who may not manage the job's credentials (``runner_credential_require_manager``).
    """
    if actor is not None:
        runner_credential_require_manager(actor=actor, job=credential.job)
    now = timezone.now()
    with transaction.atomic():
        changed = RunnerCredential.objects.filter(pk=credential.pk, revoked_at__isnull=True).update(
            revoked_at=now, updated_at=now
        )
        credential.refresh_from_db()
        if changed:
            audit_record(
                actor=actor,
                action="runner_credential_revoke",
                summary=f"Runner credential {credential.prefix}… of job {credential.job.key} revoked",
                job=credential.job,
                obj=credential,
                data={"job": credential.job.key, "prefix": credential.prefix, "label": credential.label},
            )
    return credential


# ``last_used_at`` is refreshed at most this often, so a polling runner does not write its row every call.
RUNNER_CREDENTIAL_USE_RESOLUTION = timedelta(minutes=1)


def runner_credential_record_use(*, credential: RunnerCredential) -> None:
    """Set the credential's ``last_used_at`` to now unless it was set less than a minute ago (one UPDATE)."""
    now = timezone.now()
    RunnerCredential.objects.filter(pk=credential.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - RUNNER_CREDENTIAL_USE_RESOLUTION)
    ).update(last_used_at=now)


def role_grant(*, user: Person, role: str, obj: Tenant | Job, actor: Person | None = None) -> None:
    """Grant a role (``support``, ``business_owner``, ``auditor`` on a tenant; ``technical_owner`` on a job).

    Raises ``DomainError`` for a role that does not fit the object. Side effects: the guardian
    object permission and, when it is new, an AuditEvent (``role_grant``) attributed to ``actor``
    (else the request's person, else the system), written by ``runs.audit.receivers`` -- the one place
    that sees every grant, also those made on guardian's admin pages.
    """
    table = TENANT_ROLES if isinstance(obj, Tenant) else JOB_ROLES
    if role not in table:
        raise DomainError(f"The role {role!r} cannot be granted on a {type(obj).__name__.lower()}.")
    with audit_actor(actor):
        assign_perm(table[role], user, obj)


def role_revoke(*, user: Person, role: str, obj: Tenant | Job, actor: Person | None = None) -> None:
    """Take a role back. No error when the person did not hold it (then nothing is audited).

    Side effects: the permission row deleted and an AuditEvent (``role_revoke``), as for ``role_grant``.
    """
    table = TENANT_ROLES if isinstance(obj, Tenant) else JOB_ROLES
    if role in table:
        with audit_actor(actor):
            remove_perm(table[role], user, obj)
