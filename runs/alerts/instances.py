"""Alert instances (Alertmanager/Grafana ``fingerprint`` + ``startsAt``): HA peers folded, stale firings,
re-fires. Dedup keys keep the sender's instance time, so these are decided at apply time against the
alerts already accepted on the same integration (docs/slots.md, "Alert instances"). And executions that
reuse one id across retries: ``<id>#<retry ordinal>`` (docs/slots.md, "Retries under a reused id")."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models import Q

from runs.alerts.models import Alert
from runs.alerts.parsers.base import AlertKind, ParsedAlert
from runs.attempts.models import Attempt, Run


class InstanceVerdict:
    """What a firing alert is relative to the fingerprint's earlier instances."""

    NEW = "new"  # nothing earlier of this fingerprint decides it: applied as usual
    HA_PEER = "ha_peer"  # an unresolved instance with another startsAt reports the same attempt
    STALE = "stale"  # a firing of an instance whose resolve was already received
    REFIRE = "refire"  # a new instance after the previous instance's resolve


@dataclass(frozen=True)
class InstanceFacts:
    """``verdict``; ``earlier``: the accepted firing alert of the instance it relates to (the peer, the
    resolved instance); ``starts_at``: this alert's ``startsAt`` as sent; ``fingerprint``."""

    verdict: str
    fingerprint: str = ""
    starts_at: str = ""
    earlier: Alert | None = None


def _instance_parts(record: ParsedAlert) -> tuple[str, str] | None:
    """``(fingerprint, startsAt as sent)`` from the record's instance reference ``<fingerprint>@<startsAt>``."""
    fingerprint = record.details.get("fingerprint") if isinstance(record.details, dict) else None
    if record.kind != AlertKind.ATTEMPT or not fingerprint or not record.group_ref:
        return None
    prefix = f"{fingerprint}@"
    if not record.group_ref.startswith(prefix):
        return None
    return str(fingerprint), record.group_ref[len(prefix) :]


def record_names_instance(record: ParsedAlert) -> bool:
    """True when ``record`` carries an alert instance (``group_ref`` ``<fingerprint>@<startsAt>``) that
    ``alert_instance_classify`` must compare with the fingerprint's earlier instances. Pure."""
    return _instance_parts(record) is not None


def alert_instance_classify(*, alert: Alert, record: ParsedAlert) -> InstanceFacts:
    """Classify a firing alert against the earlier instances of its fingerprint on the same integration.

    - ``stale``: its own instance (same ``startsAt``) was already resolved: a duplicate that changes
      nothing (a resolve is terminal for its instance).
    - ``ha_peer``: an instance of the fingerprint with another ``startsAt``, not resolved, already
      reported the same execution id: the same instance as an HA peer saw it ("the peer's startsAt
      differs"), a duplicate of that peer's alert.
    - ``refire``: an earlier instance of the fingerprint (earlier ``startsAt``) was resolved: the alert
      fired again after its resolve.
    - ``new`` otherwise, and for records that carry no instance (``group_ref`` ``<fingerprint>@<startsAt>``).
    Reads only accepted alerts (two queries at most). Writes nothing.
    """
    parts = _instance_parts(record)
    if parts is None:
        return InstanceFacts(InstanceVerdict.NEW)
    fingerprint, starts_at = parts
    siblings = list(
        Alert.objects.filter(
            integration_id=alert.integration_id,
            group_ref__startswith=f"{fingerprint}@",
            outcome=Alert.Outcome.ACCEPTED,
            duplicate_of__isnull=True,
        )
        .exclude(pk=alert.pk)
        .select_related("attempt")
        .order_by("created_at", "id")
    )
    resolved = {a.group_ref for a in siblings if a.kind in (AlertKind.RESOLVE,)}
    firings = [a for a in siblings if a.kind == AlertKind.ATTEMPT and a.attempt_id is not None]
    own = record.group_ref
    if own in resolved:
        earlier = next((a for a in firings if a.group_ref == own), None)
        if earlier is not None:
            return InstanceFacts(InstanceVerdict.STALE, fingerprint, starts_at, earlier)
    for peer in firings:
        if peer.group_ref == own or peer.group_ref in resolved:
            continue
        if peer.attempt is not None and peer.attempt.execution_id == (record.execution_id or ""):
            return InstanceFacts(InstanceVerdict.HA_PEER, fingerprint, starts_at, peer)
    previous = [a for a in firings if a.group_ref != own and a.group_ref in resolved]
    if previous:
        return InstanceFacts(InstanceVerdict.REFIRE, fingerprint, starts_at, previous[-1])
    return InstanceFacts(InstanceVerdict.NEW, fingerprint, starts_at)


# --- executions that reuse one id across retries -----------------------------------------------------------

_ORDINAL = re.compile(r"#([0-9]{1,9})")


def _retry_ordinal(base: str, execution_id: str) -> int | None:
    """1 for ``base`` itself, n for ``<base>#<n>`` (n >= 2), else None (another execution)."""
    if execution_id == base:
        return 1
    if not execution_id.startswith(f"{base}#"):
        return None
    match = _ORDINAL.fullmatch(execution_id[len(base) :])
    return int(match.group(1)) if match and int(match.group(1)) >= 2 else None


def _starts_anew(latest: Attempt, record: ParsedAlert) -> bool:
    """True when ``record`` reports an execution that began after the terminal ``latest`` ended.

    Its begin is its start time, else -- for a ``queued``/``running`` report -- its own event time; the
    earlier execution's end is its end time, else its start time. Unknown on either side: False (a late
    report of the same execution is never taken for a new one).
    """
    begin = record.started_at
    if begin is None and record.status in (Attempt.Status.QUEUED, Attempt.Status.RUNNING):
        begin = record.scheduled_at or record.occurred_at
    end = latest.ended_at or latest.started_at
    return begin is not None and end is not None and begin > end


def reused_id_applies(record: ParsedAlert) -> bool:
    """Whether the retry-ordinal rule decides the attempt of ``record`` (``execution_for_report``).

    Only for a record that names its own execution (not an adapter-inferred id, not an alert instance),
    gives no attempt number (a source number tells retries apart itself) and reports one attempt.
    """
    return (
        record.kind == AlertKind.ATTEMPT
        and bool(record.execution_id)
        and record.attempt_number is None
        and not record.related_attempts
        and not record.details.get("execution_id_inferred")
        and _instance_parts(record) is None
    )


def execution_for_report(*, run: Run, record: ParsedAlert) -> str:
    """The attempt's execution id a report of ``record.execution_id`` goes to on ``run`` (docs/slots.md).

    An executor that reuses one id across retries (a new start/failure sequence after a terminal state,
    with no attempt number) gets ``<id>#<retry ordinal>``: ``<id>`` is retry 1, ``<id>#2`` the next, ...
    The lineage's attempts are read under the run's row lock. A report whose start time is that of an
    attempt of the lineage belongs to it (a late report of an earlier execution); otherwise to the latest,
    unless the latest reached a terminal state and the report began after it ended (``_starts_anew``):
    then it is the next ordinal. A report that only repeats a terminal state with no start of its own is
    the same execution again (its details are kept, or it is stale), like a re-fire of a payload-named id.
    An id too long for the column with its suffix stays on the latest attempt. Returns the id to report on.
    """
    base = record.execution_id or ""
    if not reused_id_applies(record):
        return base
    Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True).first()
    candidates = Attempt.objects.filter(run=run).filter(Q(execution_id=base) | Q(execution_id__startswith=f"{base}#"))
    lineage = sorted(
        ((ordinal, a) for a in candidates if (ordinal := _retry_ordinal(base, a.execution_id)) is not None),
        key=lambda pair: pair[0],
    )
    if not lineage:
        return base
    if record.started_at is not None:
        same = next((a for _, a in lineage if a.started_at == record.started_at), None)
        if same is not None:
            return same.execution_id
    ordinal, latest = lineage[-1]
    if latest.status not in Attempt.TERMINAL or not _starts_anew(latest, record):
        return latest.execution_id
    following = f"{base}#{ordinal + 1}"
    limit = Attempt._meta.get_field("execution_id").max_length or len(following)
    return following if len(following) <= limit else latest.execution_id
