"""Every authenticated post ends final and answers without a server error (rule 9 in docs/architecture.md).

Each input that once answered 500 (and left its delivery ``received`` for ever, or stored nothing) goes
through the real endpoint; the tests assert the answer, the delivery's final outcome, the Alert rows and
their reasons or mend notes, that no Attempt carries a mangled identity, and that the sweep of
``received`` deliveries finds nothing afterwards. A second posting of each ends final as well.
"""

from __future__ import annotations

import codecs
import copy
import hashlib
import html
import io
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from django.test.client import RequestFactory
from django.urls import reverse

from runs.alerts import bulk as bulk_module  # the set-based path: fast_candidate
from runs.alerts import receive as receive_module  # the post's loop: alert_apply_in_transaction
from runs.alerts.models import Alert, Delivery
from runs.alerts.receive import delivery_sweep_received
from runs.attempts.models import Attempt, Run
from runs.catalog.models import IntegrationKey, Job, Tenant
from tests.conftest import PostAlert, fixture_path
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

FINAL = (Delivery.Outcome.PROCESSED, Delivery.Outcome.REJECTED, "failed")
GENERIC_TENANTS = ("acme-foods", "borealis-retail")


def generic_alert(**extra: Any) -> dict[str, Any]:
    """A valid generic alert of the fixtures' night, with a fresh execution id, and ``extra`` laid over it."""
    return {
        "schema": "handover.alert/v1",
        "job": "nightly-invoice-export",
        "tenant": "acme-foods",
        "environment": "prod",
        "scheduled_for": "2026-11-28T02:00:00+01:00",
        "execution_id": f"exec-{uuid.uuid4().hex[:10]}",
        "status": "failed",
        "error": "Timeout waiting for acknowledgement",
        **extra,
    }


@pytest.fixture
def generic_key(story_tenants: dict[str, Tenant], make_key: Any) -> str:
    return make_key("generic", tenants=[story_tenants[s] for s in GENERIC_TENANTS])


@pytest.fixture
def post_raw(api_client: Any) -> Callable[..., Any]:
    """``post_raw(source, body_bytes, key, content_type=...)``: a post with the exact bytes given."""

    def _post(source: str, body: bytes, key: str, content_type: str = "application/json") -> Any:
        # ``generic`` sends the bytes as they are (``post`` would re-encode them to a declared charset)
        return api_client.generic(
            "POST",
            f"/api/v1/alerts/{source}/",
            data=body,
            content_type=content_type,
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    return _post


def delivery_of(response: Any) -> Delivery:
    return Delivery.objects.get(public_id=response.json()["delivery"])


def assert_final(response: Any, status: int) -> Delivery:
    """The answer has ``status``, the delivery is final, and nothing is left for the sweep."""
    assert response.status_code == status, response.content
    delivery = delivery_of(response)
    assert delivery.outcome in FINAL
    assert delivery.response_status == status
    assert not Alert.objects.filter(outcome=Alert.Outcome.PENDING).exists()
    assert delivery_sweep_received(older_than_seconds=0) == 0
    assert not Delivery.objects.filter(outcome=Delivery.Outcome.RECEIVED).exists()
    assert not Delivery.objects.filter(try_count__gt=0).exists()  # ended final at once: no failed try
    return delivery


def only_alert(delivery: Delivery) -> Alert:
    alerts = list(delivery.alerts.all())
    assert len(alerts) == 1
    return alerts[0]


def assert_no_attempt(**lookup: Any) -> None:
    assert not Attempt.objects.filter(**lookup).exists()


def post_twice(post: Callable[[], Any], status: int) -> tuple[Delivery, Delivery]:
    """Post once and again: both answers ``status`` (4xx or 202) and both deliveries end final."""
    first = assert_final(post(), status)
    second = assert_final(post(), status)
    return first, second


# --- mended free text: the alert is processed, each mend noted ------------------------------------------


def test_attempt_number_outside_the_integer_range_is_stored_as_null_and_noted(
    post_alert: PostAlert, generic_key: str
) -> None:
    body = generic_alert(attempt=2147483648)

    first, second = post_twice(lambda: post_alert("generic", body, generic_key), 202)

    alert = only_alert(first)
    assert alert.outcome == Alert.Outcome.ACCEPTED
    assert any("2147483648" in note and "attempt" in note for note in alert.mend_notes)
    attempt = Attempt.objects.get(execution_id=body["execution_id"])
    assert attempt.number == 1  # Handover's own ordinal: the source's number was not storable
    assert attempt.trigger == Attempt.Trigger.AUTOMATIC_RETRY  # the source said it was a retry
    assert only_alert(second).outcome == Alert.Outcome.DUPLICATE
    assert Attempt.objects.count() == 1


@pytest.mark.parametrize("bad", ["\u0000", "\ud800"], ids=["nul", "lone-surrogate"])
def test_unstorable_characters_in_the_error_become_replacement_characters(
    post_alert: PostAlert, generic_key: str, bad: str
) -> None:
    body = generic_alert(error=f"ledger{bad}gateway timed out")

    first, second = post_twice(lambda: post_alert("generic", json.dumps(body).encode(), generic_key), 202)

    alert = only_alert(first)
    assert alert.outcome == Alert.Outcome.ACCEPTED
    attempt = Attempt.objects.get(execution_id=body["execution_id"])
    assert attempt.error_summary == "ledger\ufffdgateway timed out"
    assert attempt.run.status == Run.Status.FAILED
    assert any(note.startswith("error") and "U+FFFD" in note for note in alert.mend_notes)
    assert alert.fields["error_summary"] == "ledger\ufffdgateway timed out"
    assert only_alert(second).outcome == Alert.Outcome.DUPLICATE


def test_a_log_link_longer_than_its_column_is_dropped_and_noted(post_alert: PostAlert, generic_key: str) -> None:
    link = "https://logs.example.internal/q/" + "x" * 2100
    body = generic_alert(log_url=link, config_version="c" * 250)

    first, _ = post_twice(lambda: post_alert("generic", body, generic_key), 202)

    alert = only_alert(first)
    assert alert.outcome == Alert.Outcome.ACCEPTED
    attempt = Attempt.objects.get(execution_id=body["execution_id"])
    assert attempt.log_url == ""
    assert attempt.config_version == "c" * 200
    notes = " | ".join(alert.mend_notes)
    assert "log link" in notes and "2000" in notes and "dropped" in notes
    assert "configuration version" in notes and "cut to 200" in notes
    assert "log_url" not in alert.fields


# --- identity that cannot be stored exactly: rejected, naming the field and the limit ----------------------


@pytest.mark.parametrize(
    ("field", "value", "fragments"),
    [
        ("execution_id", "e" * 301, ("execution id", "301 characters", "at most 300")),
        ("environment", "p" * 51, ("environment", "51 characters", "at most 50")),
        ("execution_id", "exec\u0000one", ("execution id", "U+0000")),
        ("job", "nightly\u0000invoice-export", ("job", "U+0000")),
        ("tenant", "acme\u0000foods", ("tenant", "U+0000")),
        ("execution_id", "exec\ud800one", ("execution id", "U+D800")),
    ],
    ids=["long-execution-id", "long-environment", "nul-execution-id", "nul-job", "nul-tenant", "surrogate-exec"],
)
def test_an_identity_field_the_database_cannot_hold_rejects_the_alert(
    post_alert: PostAlert, generic_key: str, field: str, value: str, fragments: tuple[str, ...]
) -> None:
    body = generic_alert(**{field: value})

    first, second = post_twice(lambda: post_alert("generic", json.dumps(body).encode(), generic_key), 202)

    alert = only_alert(first)
    assert alert.outcome == Alert.Outcome.REJECTED
    assert all(fragment in alert.reason for fragment in fragments), alert.reason
    assert not Run.objects.exists() and not Attempt.objects.exists()
    assert first.outcome == Delivery.Outcome.PROCESSED
    assert only_alert(second).outcome in (Alert.Outcome.DUPLICATE, Alert.Outcome.REJECTED)
    assert "\u0000" not in alert.execution_id + alert.job_key + alert.tenant_slug


def test_a_resend_whose_identity_cannot_be_stored_is_a_duplicate_that_repairs_nothing(
    post_alert: PostAlert, generic_key: str
) -> None:
    # an unmatched original, then a re-send of it (same dedup key) whose environment holds a lone
    # surrogate: it was used to repair the original and failed on every try (found by the source fuzzer)
    body = generic_alert(job="no-such-job", dedup_key=f"resend-{uuid.uuid4().hex[:8]}")
    first = assert_final(post_alert("generic", json.dumps(body).encode(), generic_key), 202)
    original = only_alert(first)
    assert original.outcome == Alert.Outcome.UNMATCHED

    resend = {**body, "environment": "tail \udfff"}
    second = assert_final(post_alert("generic", json.dumps(resend).encode(), generic_key), 202)

    duplicate = only_alert(second)
    assert duplicate.outcome == Alert.Outcome.DUPLICATE and duplicate.duplicate_of_id == original.pk
    assert "not applied" in duplicate.reason and "U+DFFF" in duplicate.reason, duplicate.reason
    original.refresh_from_db()
    assert original.outcome == Alert.Outcome.UNMATCHED and original.environment == "prod"
    assert not Run.objects.exists() and not Attempt.objects.exists()


# --- times that have no window ----------------------------------------------------------------------------


def test_a_scheduled_time_in_year_9999_is_unmatched_not_a_server_error(post_alert: PostAlert, generic_key: str) -> None:
    body = generic_alert(scheduled_for="9999-12-31T23:00:00+00:00")

    first, second = post_twice(lambda: post_alert("generic", body, generic_key), 202)

    alert = only_alert(first)
    assert alert.outcome == Alert.Outcome.UNMATCHED
    assert "9999-12-31" in alert.reason
    assert not Run.objects.exists()
    assert only_alert(second).outcome == Alert.Outcome.DUPLICATE


def test_a_scheduled_time_that_is_no_fire_time_without_a_window_is_placed_on_its_slot_flagged_late(
    post_alert: PostAlert, generic_key: str
) -> None:
    # 03:17 Berlin is no fire time of 0 2 * * *: 77 min after the 02:00 slot (grace 30 min), so the
    # Slot rule places it there, flagged late, instead of making up a window that ends at 03:17.
    body = generic_alert(scheduled_for="2026-11-28T03:17:00+01:00")

    first, _ = post_twice(lambda: post_alert("generic", body, generic_key), 202)

    alert = only_alert(first)
    assert alert.outcome == Alert.Outcome.ACCEPTED
    run = Run.objects.get()
    assert run.scheduled_for == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)
    assert (run.window_start, run.window_end) == (
        datetime(2026, 11, 26, 23, 0, tzinfo=UTC),
        datetime(2026, 11, 27, 23, 0, tzinfo=UTC),
    )
    assert run.attempts.get().is_slot_late


def test_a_time_without_a_window_for_another_tenant_gets_the_tenant_reason_only(
    post_alert: PostAlert, story_tenants: dict[str, Tenant], make_key: Any
) -> None:
    key = make_key("generic", tenants=[story_tenants["cedar-health"]], name="generic-cedar")
    odd = generic_alert(scheduled_for="2026-11-28T03:17:00+01:00")
    unknown = generic_alert(tenant="no-such-tenant", scheduled_for="2026-11-28T03:17:00+01:00")

    bound_elsewhere = only_alert(assert_final(post_alert("generic", odd, key), 202))
    not_there = only_alert(assert_final(post_alert("generic", unknown, key), 202))

    assert bound_elsewhere.outcome == not_there.outcome == Alert.Outcome.UNMATCHED
    assert bound_elsewhere.reason == "tenant 'acme-foods' is not available to this integration key"
    assert not_there.reason == "tenant 'no-such-tenant' is not available to this integration key"


def test_a_job_whose_stored_schedule_is_invalid_leaves_its_alerts_unmatched(
    post_alert: PostAlert, generic_key: str, story_job: Job
) -> None:
    Job.objects.filter(pk=story_job.pk).update(schedule="61 * * * *")  # what the admin once saved
    window = {"window_start": "2026-11-27T00:00:00+01:00", "window_end": "2026-11-28T00:00:00+01:00"}

    for body in (generic_alert(), generic_alert(**window)):
        first, _ = post_twice(lambda body=body: post_alert("generic", body, generic_key), 202)
        alert = only_alert(first)
        assert alert.outcome == Alert.Outcome.UNMATCHED
        assert alert.reason.startswith("the job's schedule is invalid: "), alert.reason
        assert "61" in alert.reason
    assert not Run.objects.exists()


# --- bodies: depth, bytes, charsets, framing --------------------------------------------------------------


def with_nesting(document: dict[str, Any], depth: int) -> bytes:
    """``document`` with a key ``nest`` holding lists nested so that the whole is ``depth`` levels deep
    (the document itself is the first), written as text: ``json.dumps`` would recurse as deep."""
    inner = depth - 1
    return (json.dumps(document)[:-1] + ', "nest": ' + "[" * inner + '"leaf"' + "]" * inner + "}").encode()


SOURCE_FIXTURES = {
    "generic": ("generic", "01-first-failure.json"),
    "alertmanager": ("alertmanager", "01-first-failure.json"),
    "grafana": ("grafana", "01-first-failure.json"),
    "eventbridge-scheduler": ("eventbridge-scheduler", "01-exhausted-retries-receive-message.json"),
    "airflow": ("airflow", "02-task-failure-callback.json"),
    "pagerduty": ("pagerduty", "01-trigger-attempt1.json"),
    "kubernetes": ("kubernetes", "02-job-failed-backoff-limit.json"),
    "custom": ("generic", "01-first-failure.json"),  # any JSON: the loader refuses it before the mapping
}


@pytest.mark.parametrize("source", list(SOURCE_FIXTURES))
@pytest.mark.parametrize("depth", [65, 1000])
def test_json_nested_deeper_than_the_limit_is_rejected_by_every_source(
    post_raw: Callable[..., Any], make_key: Any, source: str, depth: int
) -> None:
    key = make_key(source, all_tenants=True)
    folder, name = SOURCE_FIXTURES[source]
    body = with_nesting(json.loads(fixture_path(folder, name).read_bytes()), depth)

    first, second = post_twice(lambda: post_raw(source, body, key), 400)

    assert first.outcome == second.outcome == Delivery.Outcome.REJECTED
    assert "nested more than 64 levels" in first.reason
    assert not first.alerts.exists()
    assert first.sha256 == hashlib.sha256(body).hexdigest() and first.size_bytes == len(body)


@pytest.mark.parametrize("source", ["generic", "airflow", "kubernetes"])
def test_json_at_the_depth_limit_still_parses(post_raw: Callable[..., Any], make_key: Any, source: str) -> None:
    key = make_key(source, all_tenants=True)
    folder, name = SOURCE_FIXTURES[source]
    body = with_nesting(json.loads(fixture_path(folder, name).read_bytes()), 64)

    delivery = assert_final(post_raw(source, body, key), 202)

    assert delivery.outcome == Delivery.Outcome.PROCESSED


def test_whole_document_nested_a_thousand_levels_is_rejected(post_raw: Callable[..., Any], generic_key: str) -> None:
    body = b"[" * 1000 + b"]" * 1000

    delivery = assert_final(post_raw("generic", body, generic_key), 400)

    assert delivery.outcome == Delivery.Outcome.REJECTED and "nested" in delivery.reason


def test_raw_nul_bytes_are_escaped_in_the_stored_body(post_raw: Callable[..., Any], generic_key: str) -> None:
    raw = json.dumps(generic_alert()).encode().replace(b'"failed"', b'"fail\x00ed"')

    first, _ = post_twice(lambda: post_raw("generic", raw, generic_key), 400)

    assert first.outcome == Delivery.Outcome.REJECTED
    assert "\x00" not in first.body and "\\x00" in first.body
    assert first.sha256 == hashlib.sha256(raw).hexdigest() and first.size_bytes == len(raw)


def test_bytes_that_are_not_utf8_are_escaped_in_the_stored_body(post_raw: Callable[..., Any], generic_key: str) -> None:
    raw = json.dumps(generic_alert()).encode().replace(b"Timeout", b"Time\xff\xfeout")

    delivery = assert_final(post_raw("generic", raw, generic_key), 400)

    assert delivery.outcome == Delivery.Outcome.REJECTED
    assert "Time\\xff\\xfeout" in delivery.body
    assert delivery.sha256 == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-32"])
def test_utf16_and_utf32_bodies_with_a_bom_are_decoded(
    post_raw: Callable[..., Any], generic_key: str, codec: str
) -> None:
    body = generic_alert(error="Zeitüberschreitung beim Hauptbuch")
    text = json.dumps(body, ensure_ascii=False)
    raw = text.encode(codec) if codec != "utf-16-le" else codecs.BOM_UTF16_LE + text.encode(codec)

    delivery = assert_final(post_raw("generic", raw, generic_key), 202)

    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert json.loads(delivery.body)["error"] == "Zeitüberschreitung beim Hauptbuch"
    assert delivery.sha256 == hashlib.sha256(raw).hexdigest() and delivery.size_bytes == len(raw)
    attempt = Attempt.objects.get(execution_id=body["execution_id"])
    assert attempt.error_summary == "Zeitüberschreitung beim Hauptbuch"


def test_utf16_without_a_bom_or_charset_is_rejected_and_stored(post_raw: Callable[..., Any], generic_key: str) -> None:
    raw = json.dumps(generic_alert()).encode("utf-16-le")

    first, _ = post_twice(lambda: post_raw("generic", raw, generic_key), 400)

    assert first.outcome == Delivery.Outcome.REJECTED
    assert "\x00" not in first.body


def test_a_declared_charset_decodes_the_body(post_raw: Callable[..., Any], generic_key: str) -> None:
    body = generic_alert(error="Zeitüberschreitung: Kunde Müller")
    raw = json.dumps(body, ensure_ascii=False).encode("latin-1")

    delivery = assert_final(
        post_raw("generic", raw, generic_key, content_type="application/json; charset=ISO-8859-1"), 202
    )

    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert "Zeitüberschreitung: Kunde Müller" in delivery.body
    assert Attempt.objects.get(execution_id=body["execution_id"]).error_summary == "Zeitüberschreitung: Kunde Müller"
    assert delivery.sha256 == hashlib.sha256(raw).hexdigest()


def test_an_unknown_declared_charset_falls_back_to_utf8(post_raw: Callable[..., Any], generic_key: str) -> None:
    body = generic_alert()

    delivery = assert_final(
        post_raw("generic", json.dumps(body).encode(), generic_key, content_type="application/json; charset=x-nope"),
        202,
    )

    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert only_alert(delivery).outcome == Alert.Outcome.ACCEPTED


def test_nan_and_infinite_numbers_are_not_json(post_raw: Callable[..., Any], generic_key: str) -> None:
    for raw in (b'{"schema": "handover.alert/v1", "x": NaN}', b'{"schema": "handover.alert/v1", "x": 1e400}'):
        delivery = assert_final(post_raw("generic", raw, generic_key), 400)
        assert delivery.outcome == Delivery.Outcome.REJECTED


class _BrokenChunks(io.RawIOBase):
    """A de-chunked WSGI input that fails the way gunicorn's does on malformed chunk framing."""

    def __init__(self, head: bytes) -> None:
        self.head = head

    def read(self, size: int = -1) -> bytes:
        from gunicorn.http.errors import InvalidChunkSize

        if self.head:
            head, self.head = self.head, b""
            return head
        raise InvalidChunkSize(b"zz")


def _wsgi_chunked_post(path: str, stream: Any, key: str) -> tuple[int, dict[str, Any]]:
    environ = RequestFactory()._base_environ(  # the test client's own environ builder
        PATH_INFO=path,
        REQUEST_METHOD="POST",
        CONTENT_TYPE="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input"] = stream
    environ["wsgi.input_terminated"] = True
    status: list[str] = []
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        payload = b"".join(WSGIHandler()(environ, lambda s, h: status.append(s)))
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)
    return int(status[0].split()[0]), json.loads(payload) if payload else {}


def test_malformed_chunked_framing_is_rejected_and_stored(generic_key: str) -> None:
    head = json.dumps(generic_alert()).encode()[:40]

    for _ in range(2):
        status, payload = _wsgi_chunked_post("/api/v1/alerts/generic/", _BrokenChunks(head), generic_key)
        assert status == 400, payload
        delivery = Delivery.objects.get(public_id=payload["delivery"])
        assert delivery.outcome == Delivery.Outcome.REJECTED
        assert "chunk" in delivery.reason
        assert delivery.body == head.decode() and delivery.size_bytes == len(head)
    assert delivery_sweep_received(older_than_seconds=0) == 0


# --- NUL and lone surrogates in every string of the airflow and eventbridge-scheduler fixtures -----------


def _string_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _string_paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _string_paths(child, (*path, index))
    elif isinstance(node, str):
        yield path


def _with_leaf(document: Any, path: tuple[Any, ...], bad: str) -> Any:
    changed = copy.deepcopy(document)
    node = changed
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = node[path[-1]][:3] + bad + node[path[-1]][3:]
    return changed


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("airflow", "02-task-failure-callback.json"),
        ("eventbridge-scheduler", "01-exhausted-retries-receive-message.json"),
        ("alertmanager", "01-first-failure.json"),
        ("kubernetes", "02-job-failed-backoff-limit.json"),
    ],
)
@pytest.mark.parametrize("bad", ["\u0000", "\ud800"], ids=["nul", "lone-surrogate"])
def test_unstorable_characters_in_any_string_end_final(
    post_raw: Callable[..., Any], make_key: Any, story_tenants: dict[str, Tenant], source: str, name: str, bad: str
) -> None:
    key = make_key(source, all_tenants=True)
    document = json.loads(fixture_path(source, name).read_bytes())
    paths = list(_string_paths(document))
    assert paths
    for path in paths:
        response = post_raw(source, json.dumps(_with_leaf(document, path, bad)).encode(), key)
        assert response.status_code in (202, 400), (path, response.content)
        delivery = Delivery.objects.get(public_id=response.json()["delivery"])
        assert delivery.outcome in FINAL, path
        assert all(a.outcome != Alert.Outcome.PENDING for a in delivery.alerts.all()), path
    for attempt in Attempt.objects.all():
        assert "\u0000" not in attempt.execution_id and "\ufffd" not in attempt.execution_id
    assert not Delivery.objects.filter(try_count__gt=0).exists()  # ended final at once: no failed try
    assert delivery_sweep_received(older_than_seconds=0) == 0


# --- a processing that fails: retried with backoff, then `failed`, shown to admins ---------------------


@pytest.fixture
def poison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Applying an alert whose execution id starts with ``poison`` fails, with a secret in its message."""
    apply = receive_module.alert_apply_in_transaction

    def failing(alert: Alert, record: Any, ctx: Any) -> Alert:
        if (record.execution_id or "").startswith("poison"):
            raise RuntimeError("ledger refused Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345")
        return apply(alert, record, ctx)

    monkeypatch.setattr(receive_module, "alert_apply_in_transaction", failing)
    candidate = bulk_module.fast_candidate

    def failing_candidate(delivery: Any, index: int, record: Any, ctx: Any) -> Any:
        if (getattr(record, "execution_id", None) or "").startswith("poison"):  # the set-based path fails alike
            raise RuntimeError("ledger refused Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345")
        return candidate(delivery, index, record, ctx)

    monkeypatch.setattr(bulk_module, "fast_candidate", failing_candidate)


def test_a_failing_processing_answers_202_and_is_retried_with_backoff_until_failed(
    post_alert: PostAlert, generic_key: str, poison: None, client: Client
) -> None:
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False):
        response = post_alert("generic", generic_alert(execution_id="poison-1"), generic_key)

    assert response.status_code == 202
    assert "retried" in response.json()["detail"]
    delivery = Delivery.objects.get()
    assert (delivery.outcome, delivery.try_count) == (Delivery.Outcome.RECEIVED, 1)
    assert delivery.next_try_at == start + timedelta(seconds=60)
    assert delivery.last_error.startswith("RuntimeError: ledger refused")
    assert "abcdefghijklmnopqrstuvwxyz012345" not in delivery.last_error  # redacted
    assert delivery.response_status == 202
    assert not Alert.objects.exists()  # the alert's transaction was rolled back

    # not due before its backoff; then tries 2..5 after 1, 2, 4 and 8 minutes
    with time_machine.travel(start + timedelta(seconds=59), tick=False):
        assert delivery_sweep_received() == 0
    at = start
    for tries, wait in [(2, 60), (3, 120), (4, 240)]:
        at += timedelta(seconds=wait)
        with time_machine.travel(at, tick=False):
            assert delivery_sweep_received() == 0
        delivery.refresh_from_db()
        assert (delivery.outcome, delivery.try_count) == (Delivery.Outcome.RECEIVED, tries)
        assert delivery.next_try_at == at + timedelta(seconds=wait * 2)
    with time_machine.travel(at + timedelta(seconds=480), tick=False):
        assert delivery_sweep_received() == 1  # reached its final outcome
    delivery.refresh_from_db()
    assert (delivery.outcome, delivery.try_count, delivery.next_try_at) == (Delivery.Outcome.FAILED, 5, None)
    assert delivery.reason.startswith("processing failed 5 times; the last error: RuntimeError")
    assert not Alert.objects.exists()
    with time_machine.travel(at + timedelta(days=1), tick=False):
        assert delivery_sweep_received() == 0  # failed is final

    # the anonymous health check counts it; the inbox lists it for admins, with its error
    assert Client().get("/healthz").json()["failed_deliveries"] == 1
    client.force_login(UserFactory(admin=True))
    page = client.get(reverse("runs:alert-inbox")).content.decode()
    assert "failed posts" in page and "RuntimeError: ledger refused" in page
    assert reverse("runs:delivery-reprocess", kwargs={"id": delivery.public_id}) in page


def test_an_admin_reprocesses_a_failed_delivery_once_the_cause_is_fixed(
    post_alert: PostAlert, generic_key: str, monkeypatch: pytest.MonkeyPatch, client: Client
) -> None:
    body = generic_alert(execution_id="poison-2")
    with monkeypatch.context() as patched:

        def failing(alert: Alert, record: Any, ctx: Any) -> Alert:
            raise RuntimeError("bug")

        patched.setattr(receive_module, "alert_apply_in_transaction", failing)
        post_alert("generic", body, generic_key)
    Delivery.objects.update(outcome=Delivery.Outcome.FAILED, try_count=5, next_try_at=None, reason="kept failing")
    delivery = Delivery.objects.get()
    person = UserFactory()
    client.force_login(person)
    url = reverse("runs:delivery-reprocess", kwargs={"id": delivery.public_id})
    assert client.post(url).status_code == 302  # to the admin login: not for people who are not staff
    assert Delivery.objects.get().outcome == Delivery.Outcome.FAILED
    page = client.get(reverse("runs:alert-inbox")).content.decode()
    assert "RuntimeError" not in page  # people see only the count

    client.force_login(UserFactory(admin=True))
    response = client.post(url)

    assert response.status_code == 302
    delivery.refresh_from_db()
    assert (delivery.outcome, delivery.try_count) == (Delivery.Outcome.PROCESSED, 0)
    assert only_alert(delivery).outcome == Alert.Outcome.ACCEPTED
    assert Attempt.objects.get().execution_id == "poison-2"
    assert client.post(url).status_code == 404  # no longer failed


def test_a_hundred_poison_deliveries_do_not_delay_a_recoverable_one(
    generic_key: str, poison: None, django_assert_max_num_queries: Any
) -> None:
    key = IntegrationKey.objects.get(prefix=generic_key[:12])
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)

    def left_received(execution_id: str, seconds: int) -> Delivery:
        """A delivery a crash left ``received`` (stored, never processed)."""
        body = json.dumps(generic_alert(execution_id=execution_id))
        return Delivery.objects.create(
            integration=key.integration,
            key=key,
            received_at=start + timedelta(seconds=seconds),
            size_bytes=len(body),
            sha256="0" * 64,
            body=body,
        )

    for n in range(100):  # older than the recoverable one: the old sweep took only these
        left_received(f"poison-{n}", n)
    recoverable = left_received("exec-recoverable", 200)

    with time_machine.travel(start + timedelta(hours=1), tick=False):
        assert delivery_sweep_received() == 1

    recoverable.refresh_from_db()
    assert recoverable.outcome == Delivery.Outcome.PROCESSED
    assert Attempt.objects.get().execution_id == "exec-recoverable"
    poisoned = Delivery.objects.exclude(pk=recoverable.pk)
    assert set(poisoned.values_list("outcome", "try_count")) == {(Delivery.Outcome.RECEIVED, 1)}
    assert set(poisoned.values_list("next_try_at", flat=True)) == {start + timedelta(hours=1, seconds=60)}
    with time_machine.travel(start + timedelta(hours=1, seconds=30), tick=False):
        assert delivery_sweep_received() == 0  # every poison delivery waits for its backoff


def test_mend_notes_are_shown_on_the_alert_page_and_in_the_api(
    post_alert: PostAlert, generic_key: str, client: Client
) -> None:
    body = generic_alert(error="bad\u0000byte", attempt=2**40)
    alert = only_alert(assert_final(post_alert("generic", json.dumps(body).encode(), generic_key), 202))
    assert len(alert.mend_notes) == 2
    client.force_login(UserFactory(admin=True))

    page = client.get(reverse("runs:alert-detail", kwargs={"id": alert.public_id})).content.decode()
    api = client.get(f"/api/v1/alerts/{alert.public_id}/").json()

    assert "Mended" in page and all(html.escape(note) in page for note in alert.mend_notes)
    assert api["mend_notes"] == alert.mend_notes


class _StalledBody(io.RawIOBase):
    """A WSGI input whose client stopped sending: the read times out (gunicorn.conf.py's read timeout)."""

    def read(self, size: int = -1) -> bytes:
        raise TimeoutError("timed out")


def test_a_body_that_stalls_is_cut_off_rejected_and_stored(generic_key: str) -> None:
    status, payload = _wsgi_chunked_post("/api/v1/alerts/generic/", _StalledBody(), generic_key)

    assert status == 400, payload
    delivery = Delivery.objects.get(public_id=payload["delivery"])
    assert delivery.outcome == Delivery.Outcome.REJECTED
    assert "reading failed: TimeoutError (timed out)" in delivery.reason
    assert (delivery.body, delivery.size_bytes, delivery.response_status) == ("", 0, 400)


def test_a_lone_surrogate_echoed_to_a_pagerduty_sender_is_answered_as_u_fffd(
    post_raw: Callable[..., Any], make_key: Any, story_tenants: dict[str, Tenant]
) -> None:
    key = make_key("pagerduty", all_tenants=True)
    event = json.loads(fixture_path("pagerduty", "92-acknowledge-offset-bad-severity.json").read_bytes())
    event.update(routing_key=key, dedup_key="incident-\ud800")

    response = post_raw("pagerduty", json.dumps(event).encode(), key)
    delivery = assert_final(response, response.status_code)

    assert response.status_code in (202, 400)
    assert response.json().get("dedup_key", "incident-\ufffd") == "incident-\ufffd"
    assert "\\ud800" not in json.dumps(delivery.response_body)


def test_a_job_counting_a_huge_number_of_failed_pods_lists_only_the_first_attempts(
    post_raw: Callable[..., Any], make_key: Any, story_tenants: dict[str, Tenant]
) -> None:
    key = make_key("kubernetes", all_tenants=True)
    job = json.loads(fixture_path("kubernetes", "02-job-failed-backoff-limit.json").read_bytes())
    job["status"]["failed"] = 100_000

    delivery = assert_final(post_raw("kubernetes", json.dumps(job).encode(), key), 202)

    alert = only_alert(delivery)
    assert alert.outcome == Alert.Outcome.ACCEPTED
    assert Attempt.objects.count() == 51  # pods 1-50, and the newest (#100000) the alert reports
    assert Attempt.objects.filter(execution_id__endswith="#100000").exists()
    assert "99949 more counted only" in alert.fields["details"]["related_attempts_cut"]


def test_a_lone_surrogate_in_a_body_the_redaction_rewrites_leaves_a_storable_body(
    post_raw: Callable[..., Any], make_key: Any, story_tenants: dict[str, Tenant]
) -> None:
    # a routing key that is no string makes the redaction rewrite the JSON, which spelt the escaped
    # lone surrogate of another field as the character itself (found by the source fuzzer)
    key = make_key("pagerduty", all_tenants=True)
    event = json.loads(fixture_path("pagerduty", "04-resolve-next-run-ok.json").read_bytes())
    event.update(routing_key=2147483648, event_action="tail \udfff", dedup_key=-0.0)

    response = post_raw("pagerduty", json.dumps(event).encode(), key)
    delivery = assert_final(response, response.status_code)

    assert response.status_code in (202, 400)
    assert "2147483648" not in delivery.body
    delivery.body.encode()  # storable: no lone surrogate left in the stored text
