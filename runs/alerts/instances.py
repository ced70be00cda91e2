"""Alert instances (Alertmanager/Grafana ``fingerprint`` + ``startsAt``): HA peers folded, stale firings,
re-fires. Dedup keys keep the sender's instance time, so these are decided at apply time against the
alerts already accepted on the same integration (docs/slots.md, "Alert instances")."""

from __future__ import annotations

from dataclasses import dataclass

from runs.alerts.models import Alert
from runs.alerts.parsers.base import AlertKind, ParsedAlert


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
