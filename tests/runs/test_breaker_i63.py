"""Hostile inputs nobody here wrote (i63): each test is a fault found by probing, fixed at its rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Attempt
from runs.catalog.models import Integration, Tenant
from runs.catalog.transport import integration_transport_update
from runs.timeline.models import TimelineEvent
from tests.conftest import PostAlert
from tests.runs.ingest_support import custom_with_url_key, row_mapping

pytestmark = pytest.mark.django_db

HIDDEN = "Earlier-hidden-S3cretValue-42"
LATER = "Later-kept-S3cretValue-77"


@pytest.fixture
def custom_key(story_tenants: dict[str, Tenant]) -> tuple[Integration, str]:
    """A custom integration reading one row per record (its error under ``msg``) and a URL key to it."""
    return custom_with_url_key("custom-i63", row_mapping(fields={"error_summary": "msg"}))


def _row(run_id: str, msg: str) -> str:
    """One record as JSON text, without its closing brace (a test adds keys of its own spelling)."""
    row = {
        "job": "nightly-invoice-export",
        "tenant": "acme-foods",
        "run_id": run_id,
        "state": "fail",
        "scheduled": "2026-11-28T01:00:00Z",
        "msg": msg,
    }
    return json.dumps(row)[:-1]


def _post(client: Client, key: str, body: str) -> Delivery:
    response = client.post(f"/api/v1/alerts/custom/k/{key}/", data=body, content_type="text/plain")
    assert response.status_code == 202, response.content
    delivery = Delivery.objects.get(public_id=response.json()["delivery"])
    assert delivery.outcome == Delivery.Outcome.PROCESSED, delivery.reason
    return delivery


def _stored_anywhere(secret: str) -> list[str]:
    """Where ``secret`` is stored verbatim: the delivery bodies, the alerts, the attempts, the timeline."""
    places = []
    for delivery in Delivery.objects.all():
        if secret in delivery.body or secret in json.dumps(delivery.response_body, ensure_ascii=False):
            places.append(f"delivery {delivery.pk} body")
    for alert in Alert.objects.all():
        if secret in json.dumps([str(getattr(alert, f.attname)) for f in alert._meta.concrete_fields]):
            places.append(f"alert {alert.pk}")
    for attempt in Attempt.objects.all():
        if secret in f"{attempt.error_summary} {attempt.log_url} {attempt.execution_id}":
            places.append(f"attempt {attempt.pk}")
    places += [f"event {e.pk}" for e in TimelineEvent.objects.filter(summary__contains=secret)]
    return places


def _ndjson(first: str, second: str) -> str:
    return first + "\n" + second + "\n"


def _envelope(first: str, second: str) -> str:
    head = json.dumps({"event_id": "e1"})
    item = json.dumps({"type": "check_in"})
    return "\n".join([head, item, first, item, second]) + "\n"


def _read_by(custom_key: tuple[Integration, str], frame: Any) -> str:
    """Set the custom integration to read posts framed by ``frame`` (``_ndjson`` or ``_envelope``: an
    envelope's records are its items' payloads); returns the key."""
    integration, key = custom_key
    kind = frame.__name__.strip("_")
    integration_transport_update(integration=integration, actor=None, allow_get=False, decoder_kind=kind)
    if kind == "envelope":
        integration.settings["mapping"]["records"] = "[*].payload"
        integration.save()
    return key


@pytest.mark.parametrize("frame", [_ndjson, _envelope], ids=["ndjson", "envelope"])
def test_a_secret_a_repeated_key_hides_in_a_decoded_line_is_redacted_where_it_recurs(
    client: Client, custom_key: tuple[Integration, str], frame: Any
) -> None:
    """A line read by a transport decoder was parsed with ``json.loads``: a repeated key's earlier
    value was dropped unnoticed, so the secret it held was not the post's and was stored verbatim where
    it recurs (another record's error summary, its attempt, the timeline, the stored body)."""
    key = _read_by(custom_key, frame)
    first = _row("r-1", "failed") + f', "password": "{HIDDEN}", "password": "{LATER}"}}'
    second = _row("r-2", f"login refused for {HIDDEN} and {LATER}") + "}"
    delivery = _post(client, key, frame(first, second))
    assert delivery.alerts.count() == 2
    assert _stored_anywhere(HIDDEN) == []
    assert _stored_anywhere(LATER) == []
    assert Attempt.objects.get(execution_id="r-2").error_summary.startswith("login refused for ‹redacted:")


ESCAPED = 'Sup3r/S3cret"V4lue-9'  # spelled in the body with JSON escapes only


@pytest.mark.parametrize("frame", [_ndjson, _envelope], ids=["ndjson", "envelope"])
@pytest.mark.parametrize(
    "spelling",
    [r"Sup3r\/S3cret\"V4lue-9", r"\u0053up3r/S3cr\u0065t\"V4lu\u0065-9", r"Sup3r\u002fS3cret\u0022V4lue-9"],
    ids=["solidus", "unicode", "escaped-quote"],
)
def test_a_secret_spelled_with_json_escapes_is_redacted_in_the_stored_body(
    client: Client, custom_key: tuple[Integration, str], frame: Any, spelling: str
) -> None:
    """The stored text of a body a decoder reads is redacted as free text, where a post's secret was
    looked for only as written or percent-encoded: spelled with JSON escapes (``\\/``, ``\\u0065``,
    ``\\"``) it was kept verbatim in the stored body, readable by anyone who parses it."""
    key = _read_by(custom_key, frame)
    first = _row("r-1", "failed") + f', "api_key": "{spelling}"}}'
    second = _row("r-2", "x")[: -len('"x"')] + f'"login with {spelling} refused"}}'
    delivery = _post(client, key, frame(first, second))
    assert delivery.alerts.count() == 2
    assert ESCAPED not in delivery.body
    assert ESCAPED not in str([json.loads(line) for line in delivery.body.splitlines() if line])
    assert _stored_anywhere(ESCAPED) == []
    assert Attempt.objects.get(execution_id="r-2").error_summary.startswith("login with ‹redacted:")
    # the stored body still decodes (reprocessing reads it): the redacted literals are JSON again
    assert [json.loads(line)["run_id"] for line in delivery.body.splitlines() if "run_id" in line] == ["r-1", "r-2"]


SNS_PASSWORD = "Hidden-pw-9988-kk"


def _sns_cloudwatch_alarm() -> dict[str, Any]:
    """An AWS SNS notification carrying a CloudWatch alarm: the alarm is a JSON document sent as the
    string ``Message`` (docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html)."""
    alarm = {
        "AlarmName": "nightly-invoice-export failed",
        "NewStateValue": "ALARM",
        "NewStateReason": f"Threshold crossed; retry with {SNS_PASSWORD} refused",
        "Trigger": {"Dimensions": [{"name": "db_password", "value": SNS_PASSWORD}], "Period": 60},
    }
    return {
        "Type": "Notification",
        "MessageId": "5f4b6a2e-0000-4000-8000-000000000001",
        "TopicArn": "arn:aws:sns:eu-west-1:123456789012:alarms",
        "Subject": "ALARM: nightly-invoice-export failed",
        "Message": json.dumps(alarm),
        "Timestamp": "2026-11-28T01:00:00.000Z",
    }


def test_a_secret_in_a_json_document_sent_as_a_string_is_not_stored(
    client: Client, custom_key: tuple[Integration, str]
) -> None:
    """A JSON document sent as a string (an SNS ``Message``) was redacted as free text: a secret in a
    ``{"name": "db_password", "value": …}`` pair inside it is no free-text shape, so it was stored in
    the body, and wherever it recurred (the error summary a mapping takes from the whole record)."""
    integration, key = custom_key
    integration.settings["mapping"]["fields"]["error_summary"] = "to_string(@)"
    integration.settings["mapping"]["defaults"].update(
        {"job_key": "nightly-invoice-export", "tenant": "acme-foods", "status": "failed"}
    )
    integration.settings["mapping"]["fields"].update({"execution_id": "MessageId", "scheduled_for": "Timestamp"})
    for name in ("job_key", "tenant", "status"):
        integration.settings["mapping"]["fields"].pop(name)
    integration.save()
    delivery = _post(client, key, json.dumps(_sns_cloudwatch_alarm()))
    assert delivery.alerts.get().outcome == Alert.Outcome.ACCEPTED
    assert _stored_anywhere(SNS_PASSWORD) == []
    stored = json.loads(json.loads(delivery.body)["Message"])  # still the alarm, as JSON
    assert stored["Trigger"]["Dimensions"][0]["value"].startswith("‹redacted:")
    assert stored["NewStateReason"].startswith("Threshold crossed; retry with ‹redacted:")


def test_a_name_value_secret_in_a_body_that_is_not_json_is_not_stored(
    story_tenants: dict[str, Tenant], make_key: Any, post_alert: PostAlert
) -> None:
    """A body that is not JSON as a whole (here Latin-1 bytes sent without a charset: not UTF-8, so
    the undecodable byte is kept as ``\\xe4``) is redacted by the free-text rules, which read
    ``"password": "…"`` but not a ``{"name": "DB_PASSWORD", "value": "…"}`` pair (container env,
    CloudWatch dimensions), plain or inside a JSON string: it was stored verbatim in the rejected post."""
    env = [
        {"name": "DB_PASSWORD", "value": SNS_PASSWORD},
        {"value": 73459912, "name": "api_token"},
        {"name": "region", "value": "eu-west-1"},  # not a secret: kept
    ]
    message = json.dumps({"Trigger": {"Dimensions": [{"name": "db_password", "value": f"x-{SNS_PASSWORD}"}]}})
    body = json.dumps({"status": "failed", "job": "Abschlu\u00df", "env": env, "Message": message}, ensure_ascii=False)
    response = post_alert("generic", body.encode("latin-1"), make_key("generic", all_tenants=True))
    assert response.status_code == 400
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.REJECTED
    assert "\\xdf" in delivery.body  # nothing lost: the post is kept, its undecodable byte spelled out
    assert SNS_PASSWORD not in delivery.body
    assert "73459912" not in delivery.body
    assert '{"name": "region", "value": "eu-west-1"}' in delivery.body


@pytest.mark.parametrize("frame", [_ndjson, _envelope], ids=["ndjson", "envelope"])
def test_a_decoded_line_spelling_a_lone_surrogate_is_processed_not_left_received(
    client: Client, custom_key: tuple[Integration, str], frame: Any
) -> None:
    """A line may spell a lone surrogate (``"\\ud800"``, valid JSON). The decoder wrote the decoded
    lines as UTF-8, which has no spelling for it: every processing failed with UnicodeEncodeError and
    the post stayed ``received`` (rule 9: it ends ``processed`` or ``rejected``, as a JSON body does)."""
    key = _read_by(custom_key, frame)
    first = _row("r-1", "x")[: -len('"x"')] + '"half \\ud800 a surrogate"}'
    delivery = _post(client, key, frame(first, _row("r-2", "plain") + "}"))
    assert delivery.try_count == 0 and delivery.last_error == ""
    alerts = {alert.execution_id: alert for alert in delivery.alerts.all()}
    assert set(alerts) == {"r-1", "r-2"}
    assert Attempt.objects.get(execution_id="r-1").error_summary == "half \ufffd a surrogate"


FORM_SECRET = "QPsecret1234abcdZZ"


def _form_posted(client: Client, integration: Integration, key: str, run_id: str, rest: str) -> Delivery:
    """Post a form record ``run_id`` (``rest``: its fields after the identity, sent as written) to the
    custom integration read as forms; returns its delivery, processed."""
    integration_transport_update(integration=integration, actor=None, allow_get=False, decoder_kind="form")
    body = (
        f"job=nightly-invoice-export&tenant=acme-foods&run_id={run_id}&state=fail"
        f"&scheduled=2026-11-28T01%3A00%3A00Z{rest}"
    )
    response = client.post(
        f"/api/v1/alerts/custom/k/{key}/", data=body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 202
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    return delivery


def test_a_form_value_split_at_an_unencoded_ampersand_keeps_no_query_secret(
    client: Client, custom_key: tuple[Integration, str]
) -> None:
    """A sender that does not percent-encode its form values (Nagios-style output) splits a value at its
    ``&``: ``msg=failed&see https://h/x?api_key=…`` decodes to a field named ``see https://h/x?api_key``
    holding the key. That name reads like free text, so it was no secret name: the value was not the
    post's secret, and where it recurred alone (the error summary, its attempt, the timeline) it was
    stored verbatim. A record written whole as JSON (``to_string(@)``) lost it too."""
    integration, key = custom_key
    delivery = _form_posted(
        client,
        integration,
        key,
        "f-1",
        f"&msg=export failed, retried with {FORM_SECRET}&see https://hooks.example.com/x?api_key={FORM_SECRET}",
    )
    assert delivery.alerts.get().outcome == Alert.Outcome.ACCEPTED
    assert _stored_anywhere(FORM_SECRET) == []
    assert Attempt.objects.get(execution_id="f-1").error_summary.startswith("export failed, retried with ‹redacted:")


def test_a_record_written_whole_as_json_keeps_no_secret_a_form_split_off(
    client: Client, custom_key: tuple[Integration, str]
) -> None:
    """An error summary a mapping writes with ``to_string(@)`` is a JSON document, redacted as data: a
    form split at an unencoded ``&`` gives a key that is free text (``db login refused, password``),
    no secret name, yet the free-text pair rule reads ``password": "…"`` in the text as written -- it
    must still run after the document's own redaction, not be skipped for it."""
    integration, key = custom_key
    integration.settings["mapping"]["fields"]["error_summary"] = "to_string(@)"
    integration.save()
    _form_posted(client, integration, key, "f-2", f"&msg=export failed&db login refused, password={FORM_SECRET}")
    assert _stored_anywhere(FORM_SECRET) == []
    summary = json.loads(Attempt.objects.get(execution_id="f-2").error_summary)  # still the record, as JSON
    assert summary["db login refused, password"].startswith("‹redacted:")


def test_a_pair_secret_of_a_body_that_is_not_json_is_redacted_where_it_recurs(
    story_tenants: dict[str, Tenant], make_key: Any, post_alert: PostAlert
) -> None:
    """ndjson sent to an integration that reads JSON is not JSON as a whole: the free-text rules
    redacted ``"password": "…"`` where the pair stands, but the same value elsewhere without its name
    (a note of another line) was stored verbatim, where a JSON body's secret is redacted wherever it
    recurs (docs/security.md: the secret values the same post holds under secret names)."""
    lines = [
        json.dumps({"status": "failed", "note": f"retried with {HIDDEN}"}),
        json.dumps({"status": "failed", "password": HIDDEN}),
    ]
    response = post_alert("generic", ("\n".join(lines) + "\n").encode(), make_key("generic", all_tenants=True))
    assert response.status_code == 400
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.REJECTED
    assert HIDDEN not in delivery.body
    assert "retried with ‹redacted:" in delivery.body
