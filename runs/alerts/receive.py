"""One post: stored first, then parsed, its alerts recorded and applied in chunks (one transaction per
chunk); the response kept; and the sweep that finishes a delivery a crash or a failed processing left
``received`` -- with backoff, storing it ``failed`` after ``DELIVERY_MAX_TRIES`` (rule 9 in
docs/architecture.md: every authenticated post ends ``processed``, ``rejected`` or ``failed``)."""

from __future__ import annotations

import hashlib
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from django.conf import settings as django_settings
from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from handover.core.errors import DomainError, InvalidTransition
from handover.core.rows import rows_insert
from runs.alerts.apply import alert_apply_in_transaction, alert_duplicate_apply
from runs.alerts.bulk import alerts_receive_set, set_path_enabled
from runs.alerts.content_encoding import Inflated, body_inflate
from runs.alerts.context import Answer, IngestResult, PostContext, runner_reports_write
from runs.alerts.decoders import body_decode, body_decode_noting_repeats
from runs.alerts.identity import record_target_names
from runs.alerts.models import Alert, AuthFailureCounter, Delivery
from runs.alerts.parsers.base import (
    FormatError,
    InvalidItem,
    JsonBody,
    ParsedAlert,
    decode_body,
    json_body,
    json_preparsed,
    storable_data,
    storable_text,
    unstorable_characters,
)
from runs.alerts.parsers.registry import get_adapter, integration_settings_in_force
from runs.alerts.records import alert_record, record_mend
from runs.alerts.redaction import (
    body_secret_values,
    integration_redaction,
    redact_body_secrets,
    redact_data,
    redact_text,
    redaction_scope,
    secret_values,
)
from runs.alerts.refusals import refused_request_count
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.transport import integration_transport

logger = logging.getLogger(__name__)


# Alerts of a batch applied per transaction: a commit per alert costs more than the alert's own
# writes, and a long transaction holds its rows' locks longer (concurrent posts of the same runs wait).
CHUNK_ALERTS = 100
# ``IntegrationKey.last_used_at`` is refreshed at most this often: every post writing the key's row
# would make it the hottest lock of the ingestion path. The integration page shows it to the minute.
KEY_USED_RESOLUTION = timedelta(seconds=60)
# A delivery whose processing fails (a bug, a database error the mending did not foresee) is tried again
# by the sweep after 1, 2, 4 and 8 minutes, then stored ``failed`` with its error (shown in the inbox).
DELIVERY_MAX_TRIES = 5
DELIVERY_RETRY_BASE_SECONDS = 60
# One sweep works through the due deliveries in batches of ``limit`` (failures are pushed back by their
# backoff, so a later batch reaches the recoverable ones), up to this many batches or seconds.
SWEEP_MAX_BATCHES = 10
SWEEP_BUDGET_SECONDS = 45.0
LAST_ERROR_MAX_CHARS = 2000


def _json_safe(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def delivery_receive(
    *,
    key: IntegrationKey,
    body: bytes,
    content_type: str = "",
    received_at: datetime | None = None,
    size_bytes: int | None = None,
    is_body_truncated: bool = False,
    answer: Answer | None = None,
    unreadable_reason: str = "",
    method: str = "POST",
    content_encoding: str = "",
) -> IngestResult:
    """Store one authenticated post, then parse, record and apply every record in it.

    ``body`` is the raw bytes (for an oversized post: its first 64 KiB, with ``size_bytes`` the
    size announced or read and ``is_body_truncated`` set -- such a delivery is stored ``rejected``
    and not parsed; likewise a post whose body could not be read to its end, e.g. malformed chunked
    framing: ``unreadable_reason`` says why and ``body`` is what was read). The bytes are hashed as
    received, then decoded (``decode_body``: declared charset, else byte order mark, else UTF-8; what
    a text column cannot hold escaped); parsers read that text as UTF-8, and it is stored redacted.
    A processing that fails (any error: never answered as a server error) leaves the delivery
    ``received`` with its first try counted, for the sweep (``result.failure`` says so). Returns an
    ``IngestResult``; never raises for bad input. Side effects:
    Delivery, Alert, Run, Attempt, RunnerReport and TimelineEvent rows; the key's ``last_used_at``
    (at most once a minute). ``answer``: what the sender is told, built from the result (status and body,
    the ingestion view's); it is kept on the delivery with its outcome in one UPDATE -- inside the
    transaction of the post's last chunk when its records are applied (a post of up to ``CHUNK_ALERTS``
    records: one commit after the stored delivery's, rule 9), else after processing -- and set on
    ``result.answer``. Until then the delivery reads ``received``, which is also what a crash would leave.
    ``method`` ``GET`` (an integration that enabled GET ingestion): ``body`` is the query string,
    noted on the delivery so that parsing -- now and on reprocessing -- decodes it as a form.
    ``content_encoding``: the post's ``Content-Encoding`` header; a gzip or deflate body is inflated
    (``runs.alerts.content_encoding``, never past ``HANDOVER_MAX_BODY_BYTES``) and stored inflated, its
    hash and size those of the bytes received; an encoding not read here rejects the post, kept as sent.
    """
    integration = key.integration
    adapter = get_adapter(integration.source)
    if adapter is None:  # an integration whose adapter was removed: keep the post anyway
        raise DomainError(f"No adapter for {integration.source!r}")
    received_at = received_at or timezone.now()
    redaction = integration_redaction(integration, adapter.REDACT_PATHS)
    names = redaction.names
    inflated = (
        body_inflate(
            body,
            content_encoding,
            limit=django_settings.HANDOVER_MAX_BODY_BYTES,
            kept=django_settings.HANDOVER_KEPT_OVERSIZE_BYTES,
        )
        if method == "POST" and not is_body_truncated and not unreadable_reason
        else Inflated(body)
    )
    is_body_truncated = is_body_truncated or inflated.oversized
    decoded = decode_body(inflated.body, content_type)
    text = decoded.text.encode()  # what the parsers read, now and when the stored body is parsed again
    # Parsed once: the redaction, the post's secrets and the parser (``json_preparsed``) share it.
    parsed = json_body(text) if method == "POST" and not is_body_truncated and not unreadable_reason else None
    decoded_secrets = _decoded_secrets(text, adapter, names, integration=integration, method=method)
    with redaction_scope(decoded_secrets, names):
        stored, secrets = _body_redacted(text, adapter, names, parsed)
    secrets = [*secrets, *decoded_secrets]
    notes = decoded.notes()
    if unreadable_reason:  # the server's words may quote the post (a chunk-size line): redacted as the body is
        notes["body_unreadable"] = redact_text(storable_text(unreadable_reason), names)
    if method == "GET":
        notes["method"] = "GET"
    if inflated.coding:
        notes["content_encoding"] = redact_text(storable_text(inflated.coding), names)
    if inflated.problem:
        notes["content_encoding_problem"] = redact_text(storable_text(inflated.problem), names)
    delivery = Delivery(
        integration=integration,
        key=key,
        received_at=received_at,
        content_type=redact_text(storable_text(content_type), names)[:200],  # sender's text: a secret may hide there
        size_bytes=size_bytes if size_bytes is not None else len(body),
        sha256=hashlib.sha256(body).hexdigest(),
        body=stored,
        is_body_truncated=is_body_truncated,
        notes=notes,
    )
    # Store first: one INSERT in autocommit, committed before anything is parsed. The key's row is
    # not written in the same transaction (see KEY_USED_RESOLUTION).
    rows_insert([delivery])
    _key_mark_used(key, received_at)
    result = IngestResult(delivery=delivery)
    # A secret of this post is redacted wherever it recurs in what is derived from it (error
    # summaries, alert fields, reasons), not only where the body holds it under a secret name.
    with redaction_scope(secrets, names):
        try:
            _delivery_process(result, adapter, text, key, parsed=parsed, answer=answer)
        except Exception as exc:  # noqa: BLE001 - rule 9: the post is stored; the sweep tries again
            result.failure = _delivery_try_failed(delivery.pk, exc)
            delivery.outcome = Delivery.Outcome.RECEIVED  # as stored, whatever was set before the failure
        if result.is_outcome_written:
            return result
        if answer is not None:
            status, payload = result.answer = answer(result)
            delivery_record_response(delivery=delivery, status=status, body=payload)
        elif not result.failure:
            _delivery_write(delivery)
    return result


def _body_redacted(
    text: bytes, adapter: ModuleType, names: frozenset[str], parsed: JsonBody | None = None
) -> tuple[str, list[str]]:
    """The body as stored (redacted) and its secret values (``redact_body_secrets``), from ``parsed`` when
    the body was parsed already. JSON nested too deep for the redaction's walk (refused by every parser
    anyway) gets the free-text redaction only and gives no secrets, instead of failing the post."""
    try:
        redacted, secrets = redact_body_secrets(text, adapter.REDACT_PATHS, names, parsed=parsed)
    except RecursionError:
        redacted, secrets = redact_text(text.decode()), []
    # A body rewritten by the redaction may spell a JSON escape of a lone surrogate as the character
    # itself, which no database text column stores: mended like any free text (rule 9).
    return storable_text(redacted), secrets


def _decoded_secrets(
    text: bytes, adapter: ModuleType, names: frozenset[str], *, integration: Integration, method: str
) -> list[str]:
    """The secret values, by structure, of what the adapter reads when the integration's transport
    decoder (or a GET's form) turns the body into JSON: ndjson lines, envelope items and forms are not
    JSON as sent, so the body's own walk finds none of them, and one recurring in free text (an error
    message, the stored body) would be kept verbatim. What the decoded JSON lacks counts too: a value a
    key repeated on one line hid, an envelope item of a type not read (``DecodedBody.hidden``, by name).
    None when the body is read as it is (``json``) or cannot be decoded (the parse refuses it then);
    never raises."""
    try:
        decoder = integration_transport(integration=integration).decoder
        decoded = body_decode_noting_repeats(text, decoder=decoder, method=method)
        if decoded.body is text:
            return []
        found = body_secret_values(decoded.body, adapter.REDACT_PATHS, names)
        return [*found, *secret_values(list(decoded.hidden), (), names)] if decoded.hidden else found
    except Exception:  # noqa: BLE001 - runs before the post is stored (rule 9): the parse words any refusal
        return []


def _key_mark_used(key: IntegrationKey, at: datetime) -> None:
    """Set the key's ``last_used_at`` unless it was set less than ``KEY_USED_RESOLUTION`` before ``at``.

    A guarded UPDATE of its own (autocommit): of several posts at once, one writes and the others
    find the guard false, so the key's row is never held for a whole delivery.
    """
    if key.last_used_at is not None and at - key.last_used_at < KEY_USED_RESOLUTION:
        return
    IntegrationKey.objects.filter(pk=key.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=at - KEY_USED_RESOLUTION)
    ).update(last_used_at=at)
    key.last_used_at = at


def _delivery_process(
    result: IngestResult,
    adapter: ModuleType,
    body: bytes,
    key: IntegrationKey,
    *,
    recorded: frozenset[int] = frozenset(),
    parsed: JsonBody | None = None,
    answer: Answer | None = None,
) -> None:
    """Parse the body and record and apply each record in post order; set the outcome (in memory).

    ``recorded``: indexes of records that already have their Alert (a sweep finishing a delivery):
    they are skipped, and ``result.alerts`` lists only the alerts recorded now. ``parsed``: ``body``
    parsed already (``json_body``), handed to the parser instead of parsing it again. ``answer`` (from
    ``delivery_receive``): the outcome, with the answer it builds, is written in the last chunk's
    transaction (``result.is_outcome_written`` once that transaction has committed).
    """
    delivery = result.delivery
    if delivery.is_body_truncated:
        limit = django_settings.HANDOVER_MAX_BODY_BYTES
        result.error = FormatError(f"The body is larger than {limit} bytes; its first 64 KiB are kept.")
        _delivery_set_outcome(delivery, Delivery.Outcome.REJECTED, reason=result.error.message)
        return
    encoding_problem = (delivery.notes or {}).get("content_encoding_problem")
    if encoding_problem:
        result.error = FormatError(str(encoding_problem), field="body")
        _delivery_set_outcome(delivery, Delivery.Outcome.REJECTED, reason=result.error.message)
        return
    unreadable = (delivery.notes or {}).get("body_unreadable")
    if unreadable:
        result.error = FormatError(f"The body could not be read to its end: {unreadable}", field="body")
        _delivery_set_outcome(delivery, Delivery.Outcome.REJECTED, reason=result.error.message)
        return
    settings, settings_wrong = integration_settings_in_force(key.integration)
    ctx = PostContext(key=key, settings=settings)
    decoder = integration_transport(integration=key.integration).decoder
    try:
        decoded = body_decode(body, decoder=decoder, method=str((delivery.notes or {}).get("method", "POST")))
        with json_preparsed(decoded, parsed or JsonBody(False)):
            outcome = adapter.parse(decoded, settings=ctx.settings, received_at=delivery.received_at)
    except FormatError as exc:
        result.error = exc
        _delivery_set_outcome(delivery, Delivery.Outcome.REJECTED, reason=redact_text(exc.message))
        return
    for record in outcome.alerts:
        if isinstance(record, ParsedAlert):
            record.problems.extend(settings_wrong)  # not placed by a default instead (``settings_in_force``)
    todo = [(index, record) for index, record in enumerate(outcome.alerts) if index not in recorded]
    chunks = [todo[start : start + CHUNK_ALERTS] for start in range(0, len(todo), CHUNK_ALERTS)]
    for chunk in chunks[:-1]:
        result.alerts.extend(_alerts_receive(delivery, chunk, ctx))

    def processed() -> None:
        result.response = dict(outcome.response)
        _delivery_set_outcome(delivery, Delivery.Outcome.PROCESSED, notes=_json_safe(outcome.notes))

    if chunks:
        finish = _OutcomeWriter(result, answer, processed) if answer is not None else None
        last = _alerts_receive(delivery, chunks[-1], ctx, before_commit=finish)
        result.alerts.extend(last)
        if finish is not None and finish.committed(last):
            result.answer, result.is_outcome_written = finish.answer, True
    processed()


class _OutcomeWriter:
    """Writes a processed delivery's outcome and the sender's answer inside the transaction of its last chunk
    (``_alerts_receive(before_commit=…)``), after ``processed`` has set the outcome in memory, the answer
    built from the result as it will be once that transaction commits. ``committed(alerts)`` tells, after
    the chunk, whether this write is the one that committed: a chunk redone one alert per transaction (a
    database error) never ran it in a transaction that committed, and the caller writes the outcome
    afterwards, as for a post with no records."""

    def __init__(self, result: IngestResult, answer: Answer, processed: Callable[[], None]) -> None:
        self.result, self.build, self.processed = result, answer, processed
        self.answer: tuple[int, dict[str, Any]] | None = None
        self.alerts: list[Alert] | None = None

    def __call__(self, alerts: list[Alert]) -> None:
        self.processed()
        done = replace(self.result, alerts=[*self.result.alerts, *alerts])
        status, payload = self.answer = self.build(done)
        _delivery_write(self.result.delivery, response_status=status, response_body=redact_data(payload))
        self.alerts = alerts

    def committed(self, alerts: list[Alert]) -> bool:
        return self.alerts is alerts


def _delivery_set_outcome(
    delivery: Delivery, outcome: str, *, reason: str = "", notes: dict[str, Any] | None = None
) -> None:
    """Set the outcome in memory; ``notes`` are laid over what the delivery noted when it was stored."""
    delivery.outcome, delivery.reason = outcome, reason
    delivery.notes = {**(delivery.notes or {}), **(notes or {})}


def _delivery_write(delivery: Delivery, **response: Any) -> None:
    """Write the delivery's outcome (set in memory while it was processed), and the response if given.

    Reason, notes and response are made storable (NUL and lone surrogates as U+FFFD): they may echo
    what the sender sent.
    """
    if "response_body" in response:
        response["response_body"] = storable_data(response["response_body"])
    Delivery.objects.filter(pk=delivery.pk).update(
        outcome=delivery.outcome,
        reason=storable_text(delivery.reason),
        notes=storable_data(delivery.notes),
        next_try_at=None,
        **response,
    )


def delivery_record_response(*, delivery: Delivery, status: int, body: dict[str, Any]) -> None:
    """Keep the response given to the sender on the delivery (for the integration page).

    Writes the delivery's outcome in the same UPDATE (``delivery_receive(answer=…)`` calls it when the
    outcome was not written with the post's last chunk).
    """
    body = redact_data(body)  # it may echo what the sender sent (PagerDuty's dedup_key)
    if delivery.outcome == Delivery.Outcome.RECEIVED:  # never processed here: the sweep finishes it
        Delivery.objects.filter(pk=delivery.pk).update(response_status=status, response_body=storable_data(body))
        return
    _delivery_write(delivery, response_status=status, response_body=body)


def delivery_sweep_received(*, older_than_seconds: int | None = None, limit: int = 100) -> int:
    """Finish deliveries left ``received``: by a crash (older than the given age) or by a processing that
    failed (once their backoff has passed). Returns how many reached a final outcome.

    Due deliveries are taken oldest first (by their next try, else their receipt), in batches of
    ``limit``, for up to ``SWEEP_MAX_BATCHES`` batches or ``SWEEP_BUDGET_SECONDS``. Each is claimed in a
    transaction of its own (``select_for_update(skip_locked=True)`` on PostgreSQL; on SQLite the
    immediate transaction serialises writers and the outcome is re-read inside it), its stored body is
    parsed again, the records that have no Alert yet are recorded and applied (those committed before
    are skipped by their index), and its outcome is written -- all in that transaction, so a second
    sweep finds nothing left to do. The redacted body parses like the raw one for everything an adapter
    reads for identity (redaction never touches those fields).

    A delivery whose processing fails again is rolled back and pushed back by its backoff
    (``DELIVERY_RETRY_BASE_SECONDS`` doubled per try; ``try_count``, ``last_error`` redacted,
    ``next_try_at``); after ``DELIVERY_MAX_TRIES`` it is stored ``failed`` with the error. Since a failure
    leaves the due set until its next try, the next batch of the same sweep reaches the deliveries
    behind it: a hundred poison posts never delay a recoverable one. Never raises for one delivery.
    """
    age = older_than_seconds if older_than_seconds is not None else django_settings.HANDOVER_PENDING_SWEEP_AFTER_SECONDS
    now = timezone.now()
    due = Delivery.objects.filter(
        Q(next_try_at__isnull=True, received_at__lt=now - timedelta(seconds=age)) | Q(next_try_at__lte=now),
        outcome=Delivery.Outcome.RECEIVED,
    ).order_by(Coalesce("next_try_at", "received_at"), "id")
    deadline = time.monotonic() + SWEEP_BUDGET_SECONDS
    seen: set[int] = set()
    done = 0
    for _ in range(SWEEP_MAX_BATCHES):
        batch = list(due.exclude(pk__in=seen).values_list("pk", flat=True)[:limit])
        if not batch:
            break
        for pk in batch:
            seen.add(pk)
            try:
                done += _delivery_finish_received(pk)
            except Exception as exc:  # noqa: BLE001 - one broken delivery must not stop the sweep
                failure = _delivery_try_failed(pk, exc)
                done += failure.startswith("failed")
        if time.monotonic() > deadline:
            break
    return done


def _error_text(exc: BaseException) -> str:
    """An error as stored and logged: its class and message, redacted, storable and cut (no traceback:
    a message may quote a value, a traceback's locals never leave the process)."""
    text = redact_text(f"{type(exc).__name__}: {exc}")
    return storable_text(text)[:LAST_ERROR_MAX_CHARS]


def _delivery_try_failed(pk: int, exc: BaseException) -> str:
    """Count one failed processing of a ``received`` delivery: push it back by its backoff, or after
    ``DELIVERY_MAX_TRIES`` store it ``failed`` with the error. Returns what happened, in words."""
    error = _error_text(exc)
    now = timezone.now()
    with transaction.atomic():
        delivery = Delivery.objects.select_for_update().filter(pk=pk, outcome=Delivery.Outcome.RECEIVED).first()
        if delivery is None:  # finished meanwhile (a concurrent sweep)
            return "finished elsewhere"
        tries = delivery.try_count + 1
        if tries >= DELIVERY_MAX_TRIES:
            Delivery.objects.filter(pk=pk).update(
                outcome=Delivery.Outcome.FAILED,
                reason=f"processing failed {tries} times; the last error: {error}",
                try_count=tries,
                last_error=error,
                next_try_at=None,
            )
            outcome = f"failed after {tries} tries"
        else:
            wait = DELIVERY_RETRY_BASE_SECONDS * 2 ** (tries - 1)
            Delivery.objects.filter(pk=pk).update(
                try_count=tries, last_error=error, next_try_at=now + timedelta(seconds=wait)
            )
            outcome = f"try {tries} failed; the sweep tries again in {wait} s"
    logger.warning("delivery %s: processing %s: %s", pk, outcome, error)
    logger.debug("delivery %s: where it failed:\n%s", pk, "".join(traceback.format_tb(exc.__traceback__)))
    return outcome


def delivery_reprocess(*, delivery: Delivery, actor: Any = None) -> Delivery:
    """An admin's retry of a ``failed`` delivery: its tries start again and it is processed now.

    Raises ``InvalidTransition`` for any other outcome. Processing as the sweep does
    (``delivery_sweep_received``): a failure counts as its first new try and leaves it ``received``
    for the sweep. Returns the delivery as it is afterwards. Side effects: those of processing the
    stored body (alerts, runs, attempts, timeline events).
    """
    reset = Delivery.objects.filter(pk=delivery.pk, outcome=Delivery.Outcome.FAILED).update(
        outcome=Delivery.Outcome.RECEIVED, reason="", try_count=0, next_try_at=None
    )
    if not reset:
        raise InvalidTransition(f"Only failed deliveries can be reprocessed, not {delivery.outcome}.")
    try:
        _delivery_finish_received(delivery.pk)
    except Exception as exc:  # noqa: BLE001 - the sweep takes over
        _delivery_try_failed(delivery.pk, exc)
    logger.info("delivery %s reprocessed by %s", delivery.public_id, getattr(actor, "pk", None))
    delivery.refresh_from_db()
    return delivery


def _delivery_finish_received(pk: int) -> bool:
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("key__integration")
            .filter(pk=pk, outcome=Delivery.Outcome.RECEIVED)
            .first()
        )
        if delivery is None:  # finished or claimed meanwhile
            return False
        key = delivery.key
        delivery.integration = key.integration
        adapter = get_adapter(key.integration.source)
        if adapter is None:
            _delivery_set_outcome(
                delivery, Delivery.Outcome.REJECTED, reason=f"no adapter for {key.integration.source!r} any more"
            )
        else:
            recorded = frozenset(delivery.alerts.values_list("index", flat=True))
            result = IngestResult(delivery=delivery)
            _delivery_process(result, adapter, delivery.body.encode(), key, recorded=recorded)
        _delivery_write(delivery)
    logger.info("delivery %s finished by the sweep: %s", delivery.public_id, delivery.outcome)
    return True


def _alerts_receive(
    delivery: Delivery,
    chunk: list[tuple[int, ParsedAlert | InvalidItem]],
    ctx: PostContext,
    *,
    before_commit: Callable[[list[Alert]], None] | None = None,
) -> list[Alert]:
    """Record and apply ``chunk`` (records with their index in the post) in one transaction: set-based
    on PostgreSQL (``runs.alerts.bulk.alerts_receive_set``), one record after the other elsewhere.

    If the chunk fails on a database error (a deadlock with a concurrent batch that holds some of
    the same runs, a constraint a record trips), it is rolled back and redone one alert per
    transaction, as a lone post of each would be: per-alert outcomes never depend on the chunking.
    ``before_commit`` is called with the chunk's alerts as the chunk's last write in its one transaction
    (never on the redo): the returned list is the very list it was given only when that transaction
    committed.
    """
    try:
        with transaction.atomic():
            ctx.prime_many(_target_names(chunk, ctx))
            if set_path_enabled():
                alerts = alerts_receive_set(delivery, chunk, ctx, _alert_receive)
            else:
                alerts = [_alert_receive(delivery, index, record, ctx) for index, record in chunk]
            runner_reports_write(ctx)
            if before_commit is not None:
                before_commit(alerts)
            return alerts
    except DatabaseError as exc:
        ctx.runner_reports.clear()  # rows of the rolled-back transaction
        if len(chunk) == 1:
            raise
        logger.warning(
            "delivery %s: a chunk of %d alerts failed (%s); applying them one by one", delivery.pk, len(chunk), exc
        )
    alerts = []
    for index, record in chunk:
        try:
            with transaction.atomic():
                alerts.append(_alert_receive(delivery, index, record, ctx))
                runner_reports_write(ctx)
        finally:
            ctx.runner_reports.clear()
    return alerts


def _target_names(chunk: list[tuple[int, ParsedAlert | InvalidItem]], ctx: PostContext) -> list[tuple[str, str, str]]:
    """The (job key, tenant slug, environment) the chunk's records name (``record_target_names``), read
    together before they are applied; names a text column cannot hold are left to their record's mend, and
    names that are not text (an integration's ``default_tenant`` or ``tenant_aliases`` entry set to a number
    or a list) to their record: a record refused before it is resolved never reads them."""
    names = (record_target_names(record, ctx) for _, record in chunk if not isinstance(record, InvalidItem))
    return [name for name in names if name is not None and all(_storable_name(part) for part in name)]


def _storable_name(part: object) -> bool:
    return isinstance(part, str) and not unstorable_characters(part)


def _alert_receive(delivery: Delivery, index: int, record: ParsedAlert | InvalidItem, ctx: PostContext) -> Alert:
    """Record one parsed record and, when it is a new original, apply it (inside the caller's transaction);
    a new duplicate repairs an unmatched original or keeps changed details (``alert_duplicate_apply``).

    A parsed record is mended first (``record_mend``): the alert stores and applies what the database
    can hold, with a note per mend, or is ``rejected`` when an identity field cannot be stored exactly
    (a re-send of an earlier alert with such an identity is kept as its ``duplicate``, the refusal in its
    reason, and never used to repair or update the original).
    """
    if isinstance(record, InvalidItem):
        return alert_record(delivery=delivery, index=index, record=record)[0]
    mend = record_mend(record)
    alert, created = alert_record(delivery=delivery, index=index, record=mend.record, mend=mend)
    if created and alert.outcome == Alert.Outcome.PENDING:
        alert = alert_apply_in_transaction(alert, mend.record, ctx)
    elif created and alert.outcome == Alert.Outcome.DUPLICATE and mend.refusal:
        # a re-send whose identity cannot be stored exactly repairs nothing: kept, with why, never applied
        alert.reason = f"{alert.reason}; not applied: {mend.refusal}"
        Alert.objects.filter(pk=alert.pk).update(reason=alert.reason)
    elif created and alert.outcome == Alert.Outcome.DUPLICATE:
        alert = alert_duplicate_apply(alert=alert, record=mend.record, ctx=ctx)
    return alert


def delivery_refusal_count(
    *, source: str, reason: str, network: str = "unknown", integration: Integration | None = None
) -> None:
    """Count one refused request, which stores no Delivery (nothing authenticated is ever dropped).

    Always its hourly counter (``runs.alerts.refusals.refused_request_count``: per integration or
    source, ``reason``, client ``network``). Also the running totals: with the ``integration`` whose
    key was recognised (another source's address, a bad signature, a rate limit, GET not enabled),
    its ``refused_post_count``; without one (no key, an unknown key), the per-``source`` counter with
    its last time (UTC). ``source`` is cut to 50 characters. Raises nothing of its own.
    """
    refused_request_count(source=source, reason=reason, network=network, integration=integration)
    if integration is not None:
        Integration.objects.filter(pk=integration.pk).update(refused_post_count=F("refused_post_count") + 1)
        return
    counter, _ = AuthFailureCounter.objects.get_or_create(source=source[:50])
    AuthFailureCounter.objects.filter(pk=counter.pk).update(count=F("count") + 1, last_at=timezone.now())
