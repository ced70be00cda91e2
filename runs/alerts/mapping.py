"""Custom integrations: create them, test and save their mappings, reprocess what they left unmatched.

The mapping language and its evaluation live in the pure parser package ``runs/alerts/parsers/custom/``; this module
adds what needs the database: registered jobs and tenants for the editor's preview, saving, and the
"reprocess unmatched alerts of this integration" action after a fix.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from handover.core.edits import edit_merge, edit_precondition
from handover.core.errors import Conflict, DomainError, InvalidTransition
from handover.core.people import Person
from runs.alerts.correlation import record_correlates
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import (
    AlertKind,
    FormatError,
    ParsedAlert,
    document_unstorable_characters,
    storable_data,
    storable_text,
)
from runs.alerts.parsers.base import load_json as json_load
from runs.alerts.parsers.custom.compiler import mapping_errors
from runs.alerts.parsers.custom.evaluation import MappedRecord, map_document
from runs.alerts.parsers.custom.parser import SOURCE, load_json
from runs.alerts.triage import alert_reprocess
from runs.catalog.models import Integration, Job, Tenant, normalise_slug
from runs.catalog.selectors import integration_edit_values
from runs.catalog.services import IssuedKey, integration_key_create
from runs.checks.schedule.cron import ScheduleError
from runs.checks.schedule.fire_times import previous_fire_time
from runs.checks.schedule.windows import processing_window

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "handover.mapping/v1"
PREVIEW_RECORDS = 50  # records shown per sample (all are checked)
REPROCESS_BATCH = 500


class MappingInvalid(DomainError):
    """A mapping that cannot be saved: its own errors, or samples that do not map (``errors``: path -> messages)."""

    type = "invalid-mapping"
    title = "The mapping cannot be saved"


# --- previews -------------------------------------------------------------------------------------


@dataclass
class Sample:
    """A payload to test a mapping on: pasted text, or the stored body of a delivery of the integration."""

    label: str
    body: str
    delivery_id: str = ""
    # a stored delivery's own outcome when it was received, e.g. "processed: 1 alert, 1 unmatched"
    received_as: str = ""


@dataclass
class FieldPreview:
    """One mapped field as the editor shows it."""

    name: str
    spec: str
    source: str  # mapping | default | unmapped
    found: str  # the raw value, as JSON text
    value: Any  # the converted value (datetime, int, str) or None
    error: str  # why the record cannot be mapped because of this field
    note: str = ""  # an optional field whose expression found nothing (not an error)

    @property
    def shown(self) -> str:
        """The converted value as text: times in UTC ISO 8601 (with microseconds when there are any)."""
        if self.value is None:
            return ""
        if isinstance(self.value, datetime):
            return self.value.astimezone(UTC).isoformat().replace("+00:00", "Z")
        return str(self.value)


@dataclass
class RecordPreview:
    """One record of a sample: its fields, problems, and where it would land."""

    index: int
    kind: str
    fields: list[FieldPreview]
    problems: list[str]
    warnings: list[str]
    placement: list[str]
    dedup_key: str

    @property
    def is_ok(self) -> bool:
        return not self.problems


@dataclass
class SamplePreview:
    """What a mapping makes of one sample: a format error, or its records (the first ``PREVIEW_RECORDS``)."""

    sample: Sample
    error: str = ""
    records: list[RecordPreview] = field(default_factory=list)
    record_count: int = 0
    failing_count: int = 0

    @property
    def is_ok(self) -> bool:
        return not self.error and self.record_count > 0 and self.failing_count == 0

    @property
    def verdict(self) -> str:
        if self.error:
            return self.error
        if self.record_count == 0:
            return "the mapping finds no record in this sample"
        if self.failing_count:
            return f"{self.failing_count} of {self.record_count} records do not map"
        return f"{self.record_count} record{'s' if self.record_count != 1 else ''}, all mapped"


@dataclass
class MappingPreview:
    """A mapping tried on samples: the mapping's own errors and every sample's result."""

    mapping: Any
    mapping_errors: dict[str, list[str]]
    samples: list[SamplePreview]

    @property
    def is_ok(self) -> bool:
        """True when the mapping has no error and every sample maps (there must be at least one)."""
        return not self.mapping_errors and bool(self.samples) and all(s.is_ok for s in self.samples)

    def errors(self) -> dict[str, list[str]]:
        """Every reason the mapping cannot be saved, by path (``mapping.<path>``, ``samples.<i>``)."""
        found = {f"mapping.{path}": list(messages) for path, messages in self.mapping_errors.items()}
        for number, preview in enumerate(self.samples):
            if preview.is_ok:
                continue
            messages = [f"{preview.sample.label}: {preview.verdict}"]
            for record in preview.records:
                messages += [f"record {record.index}: {problem}" for problem in record.problems]
            found[f"samples.{number}"] = messages
        return found


def _found_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)[:500]


class _Placement:
    """Where a mapped record would land: registered job, known tenant, window (cached lookups)."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job | None] = {}
        self.tenants: dict[str, bool] = {}

    def job(self, key: str) -> Job | None:
        if key not in self.jobs:
            self.jobs[key] = Job.objects.filter(key=key).first()
        return self.jobs[key]

    def tenant_known(self, slug: str) -> bool:
        folded = normalise_slug(slug).casefold()
        if folded not in self.tenants:
            self.tenants[folded] = Tenant.objects.filter(slug_key=folded).exists()
        return self.tenants[folded]

    def describe_job(self, alert: ParsedAlert) -> list[str]:
        """Only the registration of the alert's job (for a record with other problems)."""
        if alert.job_key and self.job(alert.job_key) is None:
            return [f"job {alert.job_key!r} is not registered: the alert stays unmatched until it is"]
        return []

    def describe(self, alert: ParsedAlert) -> list[str]:
        lines: list[str] = []
        if record_correlates(alert):
            lines.append(
                f"job, tenant and window come from the earlier event with correlate_by {alert.correlation_key!r}: "
                "placed on its run when that event has arrived (until then the alert waits, unmatched)"
            )
        job = self.job(alert.job_key) if alert.job_key else None
        if alert.job_key and job is None:
            lines.append(f"job {alert.job_key!r} is not registered: the alert stays unmatched until it is")
        if alert.tenant and not self.tenant_known(alert.tenant):
            lines.append(f"tenant {alert.tenant!r} is not known: the alert stays unmatched until it is")
        if alert.window_start and alert.window_end:
            lines.append(f"window {_utc(alert.window_start)} → {_utc(alert.window_end)} (from the payload)")
            return lines
        if job is None or alert.kind != AlertKind.ATTEMPT:
            return lines
        fire = alert.scheduled_for
        how = "scheduled for"
        try:
            if fire is None and alert.details.get("starts_at"):
                basis = datetime.fromisoformat(alert.details["starts_at"])
                fire = previous_fire_time(
                    job.schedule, job.timezone, basis, dst_gap=job.dst_gap_policy, dst_overlap=job.dst_overlap_policy
                )
                how = f"the latest fire time at or before {_utc(basis)} is"
            if fire is None:
                return lines
            start, end = processing_window(
                job.schedule,
                job.timezone,
                fire,
                alignment=job.window_alignment,
                dst_gap=job.dst_gap_policy,
                dst_overlap=job.dst_overlap_policy,
            )
        except ScheduleError as exc:
            lines.append(f"no window from the job's schedule: {exc}")
            return lines
        lines.append(
            f"window {_utc(start)} → {_utc(end)}: {how} {_utc(fire)}, by the job's schedule "
            f"{job.schedule!r} ({job.timezone}; a target's override may differ)"
        )
        return lines


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") + "Z"


def _record_preview(mapped: MappedRecord, placement: _Placement) -> RecordPreview:
    fields = [
        FieldPreview(
            name=name,
            spec=result.spec,
            source=result.source,
            found=_found_text(result.found),
            value=result.value,
            error=result.error,
            note=result.missing if not result.error else "",
        )
        for name, result in mapped.fields.items()
        if result.spec or result.source != "unmapped" or result.error
    ]
    alert = mapped.alert
    return RecordPreview(
        index=mapped.index,
        kind=alert.kind,
        fields=fields,
        problems=list(alert.problems),
        warnings=list(mapped.warnings),
        # with other problems, still say when the job is not registered (one more fix to make)
        placement=placement.describe(alert) if not alert.problems else placement.describe_job(alert),
        dedup_key=alert.dedup_key,
    )


def _sample_document(body: str) -> Any:
    """A sample's JSON, with what a database text column cannot hold (NUL, lone surrogates: as characters
    or as JSON escapes) replaced by U+FFFD, as ingestion mends a post's records: looking its job and
    tenant up and showing the preview never fail on them. Raises ``FormatError`` when it is not JSON."""
    return storable_data(load_json(storable_text(body).encode()))


def mapping_preview(*, mapping: Any, samples: Sequence[Sample]) -> MappingPreview:
    """Try ``mapping`` on each sample exactly as ingestion would, without writing anything.

    Returns the mapping's own errors (``runs.alerts.parsers.custom.compiler.mapping_errors``: compile errors and
    required fields neither mapped nor defaulted) and, per sample, a format error (not JSON, too many
    records) or its records with every field found, converted or failed, and where each would land
    (registered job, known tenant, window from the payload or the job's schedule). Reads jobs and
    tenants only (cached per call).
    """
    placement = _Placement()
    previews = []
    for sample in samples:
        preview = SamplePreview(sample=sample)
        try:
            # received_at() answers the preview's own time: a pasted sample was never received
            outcome = map_document(_sample_document(sample.body), mapping, received_at=timezone.now())
        except FormatError as exc:
            preview.error = exc.message
            previews.append(preview)
            continue
        preview.record_count = len(outcome.records)
        preview.failing_count = sum(1 for r in outcome.records if r.alert.problems)
        preview.records = [_record_preview(r, placement) for r in outcome.records[:PREVIEW_RECORDS]]
        previews.append(preview)
    return MappingPreview(mapping=mapping, mapping_errors=mapping_errors(mapping), samples=previews)


def mapping_from_json(text: str) -> Any:
    """Read a mapping pasted or imported as JSON: the bare mapping, or an export (``{"format", "mapping"}``).

    Read as a post's body is (``load_json``: nesting, non-finite numbers and integers too long to read
    refused), without characters a database cannot store. Raises ``MappingInvalid`` when the text is
    not such JSON or not an object.
    """
    try:
        document = json_load(text or "{}")
    except ValueError as exc:  # JsonLoadError
        raise MappingInvalid(f"The mapping is not valid JSON: {exc}", errors={"mapping": [str(exc)]}) from exc
    unstorable = document_unstorable_characters(document)
    if unstorable:
        message = f"The mapping holds characters a database cannot store ({', '.join(unstorable)})."
        raise MappingInvalid(message, errors={"mapping": [message]})
    if isinstance(document, Mapping) and document.get("format") == EXPORT_FORMAT:
        document = document.get("mapping")
    if not isinstance(document, Mapping):
        raise MappingInvalid("The mapping must be a JSON object.", errors={"mapping": ["must be a JSON object"]})
    return dict(document)


def integration_mapping(integration: Integration) -> dict[str, Any]:
    """A custom integration's mapping as stored in its settings (free JSON, edited raw in the Django
    admin): ``settings["mapping"]`` when the settings and the mapping are JSON objects, else ``{}``
    (no mapping: nothing maps until one is saved). Raises nothing."""
    own = integration.settings if isinstance(integration.settings, Mapping) else {}
    mapping = own.get("mapping")
    return dict(mapping) if isinstance(mapping, Mapping) else {}


def integration_mapping_export(*, integration: Integration) -> dict[str, Any]:
    """The integration's mapping as an export document: ``{"format", "name", "source", "mapping"}``."""
    return {
        "format": EXPORT_FORMAT,
        "name": integration.name,
        "source": integration.source,
        "mapping": integration_mapping(integration),
    }


# --- writes ---------------------------------------------------------------------------------------


def _check(mapping: Any, samples: Sequence[Sample], *, require_samples: bool) -> None:
    preview = mapping_preview(mapping=mapping, samples=samples)
    errors = preview.errors()
    if require_samples and not samples:
        errors["samples"] = ["Choose at least one sample (paste a payload or pick a recent delivery)."]
    if errors:
        first = next(iter(errors.values()))[0]
        raise MappingInvalid(f"The mapping cannot be saved: {first}", errors=errors)


def integration_custom_create(
    *,
    name: str,
    mapping: Any,
    samples: Sequence[Sample] = (),
    is_active: bool = True,
    created_by: Person | None = None,
) -> Integration:
    """Create a ``custom`` integration with a mapping that compiles and maps every given sample.

    ``mapping`` is the object described in ``runs/alerts/parsers/custom/parser.py``. Raises ``MappingInvalid``
    (errors by path: ``mapping.fields.status``, ``samples.0``, ...) and ``Conflict`` when the name is
    taken. Issue its key with ``integration_key_create``. Writes one Integration row.
    """
    name = (name or "").strip()
    if not name:
        raise DomainError("Give the integration a name.", errors={"name": ["This field is required."]})
    _check(mapping, samples, require_samples=False)
    if Integration.objects.filter(name=name).exists():
        raise Conflict(f"An integration called {name!r} exists.", errors={"name": ["This name is taken."]})
    try:
        with transaction.atomic():
            integration = Integration.objects.create(
                name=name, source=SOURCE, settings={"mapping": dict(mapping)}, is_active=is_active
            )
    except IntegrityError as exc:  # a concurrent create with the same name
        raise Conflict(f"An integration called {name!r} exists.", errors={"name": ["This name is taken."]}) from exc
    logger.info("custom integration %s created by %s", integration.public_id, getattr(created_by, "pk", None))
    return integration


def integration_custom_create_with_key(
    *,
    name: str,
    mapping: Any,
    samples: Sequence[Sample] = (),
    is_active: bool = True,
    tenants: Iterable[Tenant] = (),
    all_tenants: bool = False,
    label: str = "",
    created_by: Person | None = None,
) -> tuple[Integration, IssuedKey]:
    """Create a custom integration and issue its first key, in one transaction (both or neither).

    Raises what ``integration_custom_create`` and ``integration_key_create`` raise. The key's secret is
    in the returned ``IssuedKey`` only: show it once.
    """
    with transaction.atomic():
        integration = integration_custom_create(
            name=name, mapping=mapping, samples=samples, is_active=is_active, created_by=created_by
        )
        issued = integration_key_create(
            integration=integration, tenants=tenants, all_tenants=all_tenants, created_by=created_by, label=label
        )
    return integration, issued


def integration_custom_update(
    *,
    integration: Integration,
    name: str | None = None,
    mapping: Any = None,
    samples: Sequence[Sample] = (),
    require_samples: bool = False,
    is_active: bool | None = None,
    actor: Person | None = None,
    based_on: Mapping[str, Any] | None = None,
    if_match: str | None = None,
) -> Integration:
    """Change a custom integration's name, activity or mapping (a mapping only once it compiles and maps).

    With ``require_samples`` (the editor page) at least one sample must be given; every given sample
    must map without a problem. Other settings keys are kept, as stored when the row is locked (never
    as read before: another editor's security or transport change stays). ``based_on``:
    ``{"mapping": <the mapping the editor showed>}``; a mapping someone else saved meanwhile is not
    overwritten (``EditedMeanwhile``, ``handover.core.edits``), None checks nothing. Raises
    ``InvalidTransition`` for a built-in integration, ``MappingInvalid`` and ``Conflict`` (name taken).
    Updates the row in place.
    """
    if integration.source != SOURCE:
        raise InvalidTransition(
            f"{integration.name!r} is a built-in {integration.source} integration; only custom mappings can be edited."
        )
    values: dict[str, Any] = {}
    if mapping is not None:
        _check(mapping, samples, require_samples=require_samples)
    if name is not None and name.strip() != integration.name:
        name = name.strip()
        if not name:
            raise DomainError("Give the integration a name.", errors={"name": ["This field is required."]})
        if Integration.objects.filter(name=name).exclude(pk=integration.pk).exists():
            raise Conflict(f"An integration called {name!r} exists.", errors={"name": ["This name is taken."]})
        values["name"] = name
    if is_active is not None:
        values["is_active"] = is_active
    with transaction.atomic():
        locked = Integration.objects.select_for_update().get(pk=integration.pk)
        edit_precondition(if_match=if_match, current=integration_edit_values(locked), what=f"integration {locked.name}")
        if mapping is not None:
            kept = edit_merge(
                posted={"mapping": dict(mapping)},
                based_on=based_on,
                current={"mapping": integration_mapping(locked)},
                labels={"mapping": "the mapping"},
                what=f"integration {locked.name}",
            )
            if "mapping" in kept:
                # the settings are free JSON (``integration_mapping``): anything but an object holds no other key
                own = locked.settings if isinstance(locked.settings, Mapping) else {}
                values["settings"] = {**own, "mapping": dict(mapping)}
        if values:
            # ``updated_at`` too: the ingest path's key cache re-reads an integration whose version moved
            Integration.objects.filter(pk=integration.pk).update(**values, updated_at=timezone.now())
    if values:
        for key, value in values.items():
            setattr(integration, key, value)
        logger.info(
            "custom integration %s changed (%s) by %s",
            integration.public_id,
            ", ".join(sorted(values)),
            getattr(actor, "pk", None),
        )
    return integration


@dataclass
class ReprocessSummary:
    """What reprocessing an integration's unmatched alerts did: counts by new outcome, and what remains."""

    tried: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    remaining: int = 0

    @property
    def accepted(self) -> int:
        return self.outcomes.get(Alert.Outcome.ACCEPTED, 0)

    @property
    def unmatched(self) -> int:
        return self.outcomes.get(Alert.Outcome.UNMATCHED, 0)

    def sentence(self) -> str:
        if not self.tried:
            return "No unmatched alerts to reprocess."
        parts = [f"{count} {outcome}" for outcome, count in sorted(self.outcomes.items())]
        text = f"Reprocessed {self.tried} unmatched alert{'s' if self.tried != 1 else ''}: {', '.join(parts)}."
        if self.failures:
            text += f" {len(self.failures)} could not be reprocessed."
        if self.remaining:
            text += f" {self.remaining} remain; reprocess again."
        return text


def integration_reprocess_unmatched(
    *, integration: Integration, actor: Person | None = None, limit: int = REPROCESS_BATCH
) -> ReprocessSummary:
    """Re-parse and re-apply the integration's ``unmatched`` original alerts, oldest first (at most ``limit``).

    Each goes through ``alert_reprocess`` (with the integration's mapping as it is now), in its own
    transaction. Returns a ``ReprocessSummary``; an alert whose stored body no longer holds it is
    counted in ``failures`` with the reason and stays unmatched. Side effects: those of ``alert_apply``
    (runs, attempts, timeline events) for every alert that now matches.
    """
    pending = Alert.objects.filter(
        integration=integration, outcome=Alert.Outcome.UNMATCHED, duplicate_of__isnull=True
    ).order_by("created_at", "id")
    summary = ReprocessSummary()
    total = pending.count()
    for alert in pending.select_related("delivery__key__integration", "integration")[:limit]:
        summary.tried += 1
        try:
            result = alert_reprocess(alert=alert, actor=actor)
        except InvalidTransition as exc:
            summary.failures.append(f"{alert.public_id}: {exc.detail}")
            continue
        summary.outcomes[result.outcome] = summary.outcomes.get(result.outcome, 0) + 1
    summary.remaining = max(total - summary.tried, 0)
    logger.info("integration %s: %s", integration.public_id, summary.sentence())
    return summary


def samples_from_deliveries(*, integration: Integration, delivery_ids: Iterable[object]) -> list[Sample]:
    """The stored (redacted) bodies of the named deliveries of this integration, as samples, newest first.

    Ids of other integrations' deliveries are ignored.
    """
    ids = []
    for value in delivery_ids:
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    if not ids:
        return []
    rows = (
        integration.deliveries.filter(public_id__in=ids)
        .annotate(
            alert_count=Count("alerts"),
            unmatched_count=Count("alerts", filter=Q(alerts__outcome=Alert.Outcome.UNMATCHED)),
        )
        .order_by("-received_at", "-id")
    )
    return [
        Sample(
            label=f"delivery of {_utc(d.received_at)}",
            body=d.body,
            delivery_id=str(d.public_id),
            received_as=delivery_outcome_text(d),
        )
        for d in rows
    ]


def delivery_outcome_text(delivery: Delivery) -> str:
    """A delivery's own outcome in words: ``rejected: <reason>`` or ``processed: 2 alerts, 1 unmatched``.

    Reads ``alert_count`` and ``unmatched_count`` when the query annotated them (else says nothing of
    the alerts); the reason is cut to 160 characters.
    """
    if delivery.outcome != Delivery.Outcome.PROCESSED:
        reason = delivery.reason[:160] + ("…" if len(delivery.reason) > 160 else "")
        return f"{delivery.outcome}: {reason}" if reason else str(delivery.outcome)
    alerts = getattr(delivery, "alert_count", None)
    if alerts is None:
        return str(delivery.outcome)
    unmatched = getattr(delivery, "unmatched_count", 0) or 0
    text = f"{delivery.outcome}: {alerts} alert{'s' if alerts != 1 else ''}"
    return text + (f", {unmatched} unmatched" if unmatched else "")
