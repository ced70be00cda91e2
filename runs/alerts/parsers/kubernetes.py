"""Kubernetes ``batch/v1`` Job and CronJob objects, bare or in watch events (``/api/v1/alerts/kubernetes/``).

Public documentation:

- Job API: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/
- CronJob API: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/cron-job-v1/
- Job conditions (``FailureTarget`` / ``SuccessCriteriaMet`` are interim): https://kubernetes.io/docs/concepts/workloads/controllers/job/
- CronJob behaviour: https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/
- ``batch.kubernetes.io/cronjob-scheduled-timestamp``:
  https://kubernetes.io/docs/reference/labels-annotations-taints/#batch-kubernetes-io-cronjob-scheduled-timestamp
- watch events ``{"type", "object"}`` (an ``ERROR`` carries a ``Status``): https://kubernetes.io/docs/reference/using-api/api-concepts/

A Job is one scheduled run; its attempts are pods, which the Job only counts. Attempts are inferred as
``<job uid>#<n>``: the record's own attempt is the newest pod, n = ``failed`` + ``succeeded`` + ``active``,
and pods 1 … ``failed`` (below n) are failed ``related_attempts`` (valid while the Job runs one pod at a
time; at most ``MAX_RELATED_PODS`` of them, the rest only counted). A CronJob is the job definition
(kind ``DEFINITION``). A ``JobList`` (re-list) gives a record per item.

Dedup key (before redaction, includes the state): a Job ``sha256(["job", uid, terminal condition or "",
active, succeeded, failed])`` -- a bare object and its watch wrapper give the same key, ``resourceVersion``
is not part of it; a CronJob ``sha256(["cronjob", uid, resourceVersion])``; a watch ``ERROR`` event
``sha256`` of the canonical body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runs.alerts.parsers.base import (
    AlertKind,
    AttemptState,
    FormatError,
    InvalidItem,
    ParsedAlert,
    ParseResult,
    as_mapping,
    dig,
    load_json,
    parse_epoch,
    read_timestamp,
    sha256_text,
)

SOURCE = "kubernetes"
# Whether the sender can sign its posts (runs.catalog.keys.source_can_sign):
# a Job or CronJob object posted by a watcher carries no signature of its own.
CAN_SIGN = False

# Label and annotation keys contain dots, so besides dotted paths a source may be ``label:<key>``,
# ``annotation:<key>``, ``owner:<Kind>`` (that owner reference's name) or ``env:<NAME>`` (a container's env).
DEFAULT_SETTINGS: dict[str, Any] = {
    "job_from": ["owner:CronJob"],
    "definition_job_from": ["metadata.name"],  # a CronJob object names the job itself
    "tenant_from": ["label:acme.example/tenant"],
    "environment_from": ["label:acme.example/env"],
    "scheduled_for_from": ["annotation:batch.kubernetes.io/cronjob-scheduled-timestamp"],
    "config_version_from": ["env:CONFIG_VERSION"],
    "replay_key_from": ["annotation:acme.example/replay-key"],
    "display_name_from": ["annotation:acme.example/display-name"],
    # ASCII label value -> tenant slug (``cafe-lumiere-muenchen`` -> ``café-lumière-münchen``), never a guess.
    "tenant_aliases": {},
    "default_tenant": None,
    "default_environment": None,
    "timeout_reasons": ["DeadlineExceeded"],
}

# Container env values that hold literal secrets are redacted by ``runs.alerts.redaction`` through their
# ``name`` (``DB_PASSWORD``, ``API_TOKEN`` ...), so ``CONFIG_VERSION`` survives for reprocessing;
# ``valueFrom`` references carry no secret. No path-only secrets in this format.
REDACT_PATHS: tuple[str, ...] = ()

_MANUAL_ANNOTATION = "cronjob.kubernetes.io/instantiate"  # "manual": kubectl create job --from=cronjob/…
# Earlier failed pods listed as attempts of one Job, at most (see _job).
MAX_RELATED_PODS = 50
_TERMINAL = ("Complete", "Failed")  # FailureTarget / SuccessCriteriaMet precede these and never count alone


class _ItemError(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def _key(kind: str, parts: list[Any]) -> str:
    canonical = json.dumps([kind, *parts], ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return f"{kind}:{sha256_text(canonical)}"


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else ([] if value is None else [value])


def _read(obj: Mapping[str, Any], source: str) -> Any:
    """One value by a source spec (see DEFAULT_SETTINGS); None when absent."""
    meta = as_mapping(obj.get("metadata"))
    kind, _, key = source.partition(":")
    if kind in ("label", "annotation") and key:
        values = meta.get("labels" if kind == "label" else "annotations")
        return values.get(key) if isinstance(values, Mapping) else None
    if kind == "owner" and key:
        for ref in _as_list(meta.get("ownerReferences")):
            if isinstance(ref, Mapping) and ref.get("kind") == key:
                return ref.get("name")
        return None
    if kind == "env" and key:
        pod_spec = dig(obj, "spec.template.spec") or dig(obj, "spec.jobTemplate.spec.template.spec") or {}
        for container in _as_list(pod_spec.get("containers")) if isinstance(pod_spec, Mapping) else []:
            for var in _as_list(container.get("env")) if isinstance(container, Mapping) else []:
                if isinstance(var, Mapping) and var.get("name") == key and "value" in var:
                    return var["value"]
        return None
    return dig(obj, source)


def _first(obj: Mapping[str, Any], sources: Any) -> tuple[Any, str]:
    for source in _as_list(sources):
        value = _read(obj, source) if isinstance(source, str) else None
        if value not in (None, ""):
            return value, source
    return None, ""


def _text(obj: Mapping[str, Any], settings: Mapping[str, Any], name: str, problems: list[str], key: str = "") -> str:
    """A convention text (``<key or name>_from``, else ``default_<name>``); a problem if absent/not text."""
    sources = settings.get(f"{key or name}_from")
    value, where = _first(obj, sources)
    if value is None:
        value, where = settings.get(f"default_{name}"), f"default_{name}"
    if value is None:
        tried = ", ".join(str(s) for s in _as_list(sources)) or "nothing"
        problems.append(f"no {name}: {tried} is not set and the integration has no default_{name}")
        return ""
    if not isinstance(value, str):
        problems.append(f"{name} from {where} is {value!r}, not a text value")
        return ""
    return value


def _count(status: Mapping[str, Any], name: str, at: str) -> int:
    value = status.get(name, 0)  # omitempty: a missing count is 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _ItemError(f"{at}status.{name}", f"status.{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _common(obj: Mapping[str, Any], settings: Mapping[str, Any], alert: ParsedAlert, problems: list[str]) -> None:
    """Tenant (through ``tenant_aliases``), environment and display extras, for Jobs and CronJobs alike."""
    label = _text(obj, settings, "tenant", problems)
    aliases = settings.get("tenant_aliases") or {}
    alert.tenant = (aliases.get(label, label) if isinstance(aliases, Mapping) else label) or None
    alert.environment = _text(obj, settings, "environment", problems) or None
    meta = obj["metadata"]
    alert.details.update(
        name=meta.get("name"),
        namespace=meta.get("namespace"),
        uid=meta.get("uid"),
        resourceVersion=meta.get("resourceVersion"),
        display_name=_first(obj, settings.get("display_name_from"))[0],
    )
    if label and alert.tenant != label:
        alert.details["tenant_label"] = label


def _cronjob(obj: Mapping[str, Any], settings: Mapping[str, Any]) -> ParsedAlert:
    """A CronJob describes the job definition; the mechanism compares these fields with the job target."""
    problems: list[str] = []
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"))
    alert = ParsedAlert(dedup_key=_key("cronjob", [meta["uid"], meta.get("resourceVersion")]))
    alert.kind = AlertKind.DEFINITION
    alert.job_key = _text(obj, settings, "job", problems, key="definition_job") or None
    _common(obj, settings, alert, problems)
    status = as_mapping(obj.get("status"))
    # No timeZone means the kube-controller-manager's zone (usually UTC), not the job's zone.
    alert.details.update(
        schedule=spec.get("schedule"),
        timeZone=spec.get("timeZone"),
        concurrencyPolicy=spec.get("concurrencyPolicy", "Allow"),
        startingDeadlineSeconds=spec.get("startingDeadlineSeconds"),
        suspend=bool(spec.get("suspend", False)),
        lastScheduleTime=status.get("lastScheduleTime"),  # display only: not a run, not a success signal
        lastSuccessfulTime=status.get("lastSuccessfulTime"),
    )
    zone = spec.get("timeZone") or "the controller's zone"
    alert.summary = f"CronJob {meta.get('name')}: {spec.get('schedule')!r} in {zone}"
    alert.problems = problems
    return alert


def _name_suffix_time(meta: Mapping[str, Any]) -> str | None:
    """A CronJob names its Jobs ``<cronjob>-<scheduled UTC epoch minutes>``: shown beside the annotation."""
    suffix = str(meta.get("name") or "").rsplit("-", 1)[-1]
    if not suffix.isdigit() or not _read({"metadata": meta}, "owner:CronJob"):
        return None
    try:
        return parse_epoch(int(suffix) * 60, unit="s").isoformat()
    except ValueError:  # not a time (TimeFormatError), or too many digits for an int: nothing to show
        return None


def _job(obj: Mapping[str, Any], settings: Mapping[str, Any], at: str) -> ParsedAlert:
    problems: list[str] = []
    meta, uid = obj["metadata"], obj["metadata"]["uid"]
    status = as_mapping(obj.get("status"))
    active, succeeded, failed = (_count(status, name, at) for name in ("active", "succeeded", "failed"))
    conditions = [c for c in _as_list(status.get("conditions")) if isinstance(c, Mapping)]
    terminal = next((c for c in conditions if c.get("type") in _TERMINAL and c.get("status") == "True"), None)
    terminal_type = str(terminal.get("type")) if terminal else ""

    alert = ParsedAlert(dedup_key=_key("job", [uid, terminal_type, active, succeeded, failed]))
    alert.kind = AlertKind.ATTEMPT
    alert.job_key = _text(obj, settings, "job", problems) or None
    _common(obj, settings, alert, problems)
    scheduled, where = _first(obj, settings.get("scheduled_for_from"))
    # The annotation carries the CronJob's zone offset (Z when it has none): parse_timestamp keeps the instant
    alert.scheduled_for = read_timestamp(scheduled, where, problems) if scheduled is not None else None
    alert.config_version = str(_first(obj, settings.get("config_version_from"))[0] or "")
    alert.replay_key = str(_first(obj, settings.get("replay_key_from"))[0] or "")
    alert.correlation_ref = str(uid)
    manual = (meta.get("annotations") or {}).get(_MANUAL_ANNOTATION) == "manual"
    start = read_timestamp(status.get("startTime"), f"{at}status.startTime", problems)

    def trigger(number: int) -> str:
        return "manual_rerun" if manual else ("scheduled" if number == 1 else "automatic_retry")

    newest = max(failed + succeeded + active, 1)
    ended = None
    if terminal_type == "Complete":
        state = "succeeded"
        ended = read_timestamp(status.get("completionTime"), f"{at}status.completionTime", problems)
    elif terminal_type == "Failed":
        timeouts = [str(r) for r in _as_list(settings.get("timeout_reasons"))]
        failed_condition = as_mapping(terminal)  # the Failed condition (terminal_type comes from it)
        state = "timed_out" if failed_condition.get("reason") in timeouts else "failed"
        # completionTime is absent on failed Jobs: the Failed condition's transition is the end.
        ended = read_timestamp(failed_condition.get("lastTransitionTime"), f"{at}status.conditions.Failed", problems)
        reason, message = failed_condition.get("reason") or "Failed", failed_condition.get("message") or ""
        alert.error_summary = f"{reason}: {message}".strip()
    else:
        # No terminal condition yet: a pod runs, or the controller is still deciding (interim conditions).
        state = "running" if (active or failed or succeeded) else "queued"
    alert.execution_id, alert.attempt_number = f"{uid}#{newest}", newest
    alert.trigger, alert.status = trigger(newest), state
    alert.scheduled_at = alert.scheduled_for if newest == 1 else None
    alert.started_at = start if newest == 1 else None  # startTime is the Job's, i.e. pod 1's
    alert.ended_at = ended
    alert.occurred_at = ended or alert.started_at  # None: "at receipt", the object has no pod times
    # A Job's retries are few (backoffLimit defaults to 6); a larger count is listed only up to
    # MAX_RELATED_PODS attempts (the rest are counted in ``pods``), so one post never writes thousands.
    earlier = min(failed, newest - 1)
    listed = min(earlier, MAX_RELATED_PODS)
    if listed < earlier:
        alert.details["related_attempts_cut"] = f"pods 1-{listed} are attempts; {earlier - listed} more counted only"
    for number in range(1, listed + 1):
        alert.related_attempts.append(
            AttemptState(
                execution_id=f"{uid}#{number}",
                number=number,
                trigger=trigger(number),
                status="failed",
                scheduled_at=alert.scheduled_for if number == 1 else None,
                started_at=start if number == 1 else None,
            )
        )
    interim = [str(c.get("type")) for c in conditions if c is not terminal and c.get("status") == "True"]
    spec = as_mapping(obj.get("spec"))
    alert.details.update(
        pods={"active": active, "succeeded": succeeded, "failed": failed},
        condition=terminal_type,
        reason=terminal.get("reason") if terminal else None,
        interim_conditions=interim,
        backoffLimit=spec.get("backoffLimit"),
        activeDeadlineSeconds=spec.get("activeDeadlineSeconds"),
        creationTimestamp=meta.get("creationTimestamp"),
        name_suffix_time=_name_suffix_time(meta),
    )
    if any(isinstance(spec.get(k), int) and spec[k] > 1 for k in ("parallelism", "completions")):
        alert.details["attempt_inference"] = "approximate: the Job may run several pods at a time"
    if manual:
        alert.details["instantiate"] = "manual"
        if not alert.replay_key:
            alert.details["manual_run_outside_approval"] = True
    because = f" ({terminal.get('reason')})" if terminal and terminal.get("reason") else ""
    alert.summary = f"Job {meta.get('name')}: pod {newest} {state.replace('_', ' ')}{because}"
    alert.problems = problems
    return alert


def _watch_error(doc: Mapping[str, Any], status: Mapping[str, Any]) -> ParsedAlert:
    canonical = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    code, reason, message = status.get("code"), status.get("reason"), str(status.get("message") or "")
    # "too old resource version: 48213377 (48299102)": events after the first number may have been missed.
    since = message.split("resource version:", 1)[-1].split()[0] if "resource version:" in message else None
    what = f"after resourceVersion {since}" if since else "since the watch broke"
    alert = ParsedAlert(dedup_key=f"watch-error:{sha256_text(canonical)}")
    alert.summary = f"watch ERROR {code} {reason}: {message}"
    alert.details = {"event": "ERROR", "code": code, "reason": reason, "message": message}
    alert.problems = [
        f"the watch stream reported an error ({code} {reason}: {message}), not a Job: the forwarder must "
        f"re-list Jobs, because Job changes {what} may have been missed"
    ]
    return alert


def _object(obj: Any, settings: Mapping[str, Any], at: str) -> ParsedAlert:
    if not isinstance(obj, Mapping):
        raise _ItemError(at.rstrip(".") or "", "expected a Kubernetes object (a JSON object)")
    if not isinstance(obj.get("metadata"), Mapping):
        raise _ItemError(f"{at}metadata", "metadata is required and must be an object")
    if not isinstance(obj["metadata"].get("uid"), str) or not obj["metadata"]["uid"]:
        raise _ItemError(f"{at}metadata.uid", "metadata.uid is required")
    if obj.get("kind") == "Job":
        return _job(obj, settings, at)
    if obj.get("kind") == "CronJob":
        return _cronjob(obj, settings)
    raise _ItemError(f"{at}kind", f"kind must be Job or CronJob, got {obj.get('kind')!r}")


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Parse a Job/CronJob object, a watch event or a list into records; ``FormatError`` on a broken shape."""
    try:
        doc = load_json(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise FormatError("the body must be a JSON object: a Job, a CronJob, a list or a watch event")
    try:
        if "type" in doc and "object" in doc:  # a watch event
            event = doc["type"]
            if not isinstance(doc["object"], Mapping):
                raise _ItemError("object", "a watch event's object must be a JSON object")
            if event == "ERROR":
                return ParseResult(alerts=[_watch_error(doc, doc["object"])])
            if event == "BOOKMARK":  # only a resourceVersion checkpoint: valid and empty
                return ParseResult(alerts=[], notes={"bookmark": dig(doc, "object.metadata.resourceVersion")})
            if event not in ("ADDED", "MODIFIED", "DELETED"):
                raise _ItemError("type", f"unknown watch event type {event!r}")
            alert = _object(doc["object"], settings, "object.")
            alert.details["event"] = event
            return ParseResult(alerts=[alert])
        if isinstance(doc.get("kind"), str) and doc["kind"].endswith("List"):
            if not isinstance(doc.get("items"), list):
                raise _ItemError("items", "a list must carry an items array")
            alerts: list[ParsedAlert | InvalidItem] = []
            item_kind = doc["kind"][: -len("List")]  # list items usually omit kind: the list names it
            for index, item in enumerate(doc["items"]):
                try:
                    obj = {"kind": item_kind, **item} if isinstance(item, Mapping) else item
                    alerts.append(_object(obj, settings, f"items.{index}."))
                except _ItemError as exc:  # keyed on the item, so a re-list repeats it as a duplicate
                    key = _key("invalid", [item])
                    alerts.append(InvalidItem(field=exc.field, message=exc.message, dedup_key=key))
            return ParseResult(alerts=alerts)
        return ParseResult(alerts=[_object(doc, settings, "")])
    except _ItemError as exc:
        raise FormatError(exc.message, field=exc.field) from exc
