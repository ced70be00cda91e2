"""Redaction (rule 8 in docs/architecture.md): the secret shapes, the harmless text beside them, tokens,
structured bodies, a cut 413 head, and what ingestion stores."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import override_settings

from runs.alerts.models import Alert, Delivery
from runs.alerts.redaction import (
    TOKEN_PATTERN,
    body_secret_values,
    redact_body,
    redact_data,
    redact_text,
    redaction_scope,
    redaction_token,
)
from runs.alerts.secret_shapes import SHAPES, looks_random, secret_name
from runs.attempts.models import Attempt
from runs.catalog.services import job_get_or_create
from runs.timeline.models import TimelineEvent
from tests.conftest import fixture_path

# Each shape is clearly fake but matches its detector. ``secret`` is what must disappear (the whole
# string unless ``hidden`` names the part); the canaries beside it are ids people search by.
SHAPES_TABLE: list[tuple[str, str, str]] = [
    ("aws access key id", "AKIAIOSFODNN7EXAMPLE", ""),
    ("aws secret key", 'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "wJalrXUtnFEMI"),
    ("github classic", "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", ""),
    ("github oauth", "gho_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2", ""),
    ("github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN", ""),
    ("gitlab", "glpat-" + "xxxxFAKExxxxFAKE1234", ""),
    ("stripe live", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcFAKE0123", ""),
    ("stripe restricted", "rk_live_" + "51H8abcdefghijklmnopqrstuv", ""),
    ("slack bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", ""),
    ("slack user", "xoxp-123456789012-1234567890123-1234567890123-abcdef0123456789", ""),
    ("slack webhook", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "XXXXXXXXXXXX"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N",
    ),
    (
        "pem private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
        "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    ),
    (
        "openssh private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n",
        "b3Blbn",
    ),
    ("basic-auth url", "https://admin:S3cretPassw0rd@db.example.com/x", "S3cretPassw0rd"),
    ("password pair", "password=Hunter2Hunter2", "Hunter2Hunter2"),
    ("api_key colon", "api_key: 9f8e7d6c5b4a39281726", "9f8e7d6c5b4a39281726"),
    ("secret quoted", 'client_secret: "s3cr3t value with spaces"', "s3cr3t value with spaces"),
    ("bearer", "Authorization: Bearer abcDEF123456ghiJKL789", "abcDEF123456ghiJKL789"),
    ("basic header", "Authorization: Basic dXNlcjpwYXNzLTdkM2U=", "dXNlcjpwYXNzLTdkM2U="),
    ("visa with spaces", "4111 1111 1111 1111", "4111 1111 1111 1111"),
    ("mastercard with dashes", "5555-5555-5555-4444", "5555-5555-5555-4444"),
    ("e-mail", "jane.doe@example.com", ""),
    ("npm", "npm_" + "abcdefghijklmnopqrstuvwxyz0123456789", ""),
    ("npmrc", "//registry.npmjs.org/:_authToken=npm_" + "ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210", "npm_ZYXW"),
    ("pypi", "pypi-AgEIcHlwaS5vcmc" + "CJDZmFrZS1mYWtlLWZha2U" * 4, ""),
    ("sendgrid", "SG." + "aBcDeFgHiJkLmNoPqRsTuV" + "." + "wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012", ""),
    ("twilio api key", "SK" + "0123456789abcdef0123456789abcdef", ""),
    (
        "azure storage",
        "AccountKey=" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * 2 + "ABCDEFGHIJKLMNOPQR==",
        "QUJDREVGR0hJ",
    ),
    ("google api key", "AIza" + "SyA1234567890abcdefghijklmnopqrstuv", ""),
    ("openai", "sk-proj-" + "abcdefghij1234567890" + "T3BlbkFJ" + "abcdefghij1234567890", ""),
    ("mailchimp", "0123456789abcdef0123456789abcdef-us14", ""),
    ("query token", "https://example.com/cb?token=abc123def456&x=1", "abc123def456"),
    ("query access_token", "https://example.com/cb?access_token=zzzTOKENzzz999", "zzzTOKENzzz999"),
    ("query sig", "https://x.blob.core.windows.net/c/b?sv=2020-08-04&sig=AbCdEf%2Bgh%3D", "AbCdEf%2Bgh%3D"),
    (
        "url key path",
        "https://handover.example.com/api/v1/alerts/generic/k/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg/",
        "AbCdEfGhIjKlMnOpQrStUvWxYz",
    ),
    ("apprise slack", "slack://TokenA/TokenB/TokenC/#ops", "TokenA/TokenB/TokenC"),
    ("apprise telegram", "tgram://123456789:ABCdefGHIjklMNOpqrSTUvwxYZ/-1001234567", "ABCdefGHIjkl"),
    ("discord webhook", "https://discord.com/api/webhooks/123456789012345678/abcDEF-ghiJKL_mnoPQR", "abcDEF-ghiJKL"),
    ("teams webhook", "https://acme.webhook.office.com/webhookb2/abc-123@def/IncomingWebhook/xyz789/uuid", "xyz789"),
    ("mattermost webhook", "https://chat.example.com/hooks/xh4k9q3b7pf8mcb1s6dn2wz5ya", "xh4k9q3b7pf8mcb1s6dn2wz5ya"),
    ("handover integration key", "hk_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg", ""),
    ("e-mail in a url", "https://logs.example.com/view?user=jane.doe%40example.com&run=7", "jane.doe"),
    ("random key=", "key=Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0L", "Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0L"),
    ("artifactory", "X-JFrog-Art-Api: AKCpFAKEXUCj6Np54CGlUks51YWR.", "AKCpFAKEXUCj6Np54"),
    ("telegram bot", "123456789:AAFAKErWnn-71vUFYvlIVv95hNUx9S46gCa", ""),
    ("square oauth", "sq0csp-FAKEDQtcuFK6snnTuhw5obSpJpbOMHBQrKN3mmMnxKv", ""),
    ("discord bot", "MTFAKEYwlUUNmKWhJ4AZT8vE.ZvJL35.5xAw2POuN2ZlCe24CEWQfsX0njM", ""),
    (
        "percent-encoded in a query",
        "https://logs.example.com/s?q=connect%20failed%20with%20password%3DFake-Pa55w0rd-F47tJ9%20for%20svc",
        "Fake-Pa55w0rd",
    ),
]
CANARIES = [
    "0b7c3a52-9d1e-4f7a-8c2b-5e6f7a8b9c0d",  # a UUID
    "canary-d7dfe6be-3312-4458-8360-60d594ef9343",  # a UUID whose digit groups pass Luhn
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # a sha1 commit id
    "fp-3f2a9c8e1b7d6a54",  # an alert fingerprint
    "ORD-2026-000123",  # an order id
    "1795827665742",  # epoch milliseconds (not a card)
]


@pytest.mark.parametrize(("name", "secret", "hidden"), SHAPES_TABLE, ids=[row[0] for row in SHAPES_TABLE])
@pytest.mark.parametrize("canary", CANARIES)
def test_a_secret_shape_is_redacted_and_the_canary_beside_it_survives(
    name: str, secret: str, hidden: str, canary: str
) -> None:
    text = f"job failed: {secret} near {canary} (see runbook)"

    out = redact_text(text)

    assert (hidden or secret) not in out, out
    assert canary in out
    assert "job failed:" in out and "(see runbook)" in out
    assert TOKEN_PATTERN.search(out)


def test_the_table_covers_at_least_thirty_shapes_and_every_detector_is_compiled() -> None:
    assert len(SHAPES_TABLE) >= 30
    sources = {shape.source for shape in SHAPES}
    for detector in ("AWSKeyDetector", "GitHubTokenDetector", "StripeDetector", "SlackDetector", "JwtTokenDetector"):
        assert detector in sources


@pytest.mark.parametrize(
    "harmless",
    [
        *CANARIES,
        "scheduled__2026-11-27T02:00:00+00:00",
        "nightly-invoice-export/periodic-1795827600",
        "export-cfg@41",
        "token expired for the sink",
        "primary key: order_id",
        "dedup_key=abc123def456ghi789jkl",
        'groupKey={}:{alertname="JobFailed"}',
        "KeyError: 'invoice_currency'",
        "key=value",
        "The author: Jane",
        "sha256:4f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0",
        "arn:aws:lambda:eu-west-1:123456789012:function:export",
        "APACHEAIRFLOW ACCOUNTING",
        "10.0.0.12:5432 refused",
        "https://grafana.example.com/d/abc123/jobs?orgId=1&from=now-6h",
        "s3://bucket/exports/2026-11-27/part-0001.csv",
    ],
)
def test_harmless_text_is_left_as_it_is(harmless: str) -> None:
    assert redact_text(harmless) == harmless


def test_tokens_are_deterministic_and_redaction_is_idempotent() -> None:
    secret = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcFAKE0123"
    once = redact_text(f"charge failed with {secret}")

    assert once == redact_text(f"charge failed with {secret}")
    assert redaction_token(secret) in once
    assert re.fullmatch(r"‹redacted:[0-9a-f]{8}›", redaction_token(secret))
    assert redact_text(once) == once
    assert redaction_token("other-secret-value") != redaction_token(secret)


def test_the_token_is_keyed_by_the_server_secret() -> None:
    before = redaction_token("hunter2-hunter2")
    with override_settings(SECRET_KEY="another-server-key-" + "x" * 40):
        assert redaction_token("hunter2-hunter2") != before


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("password", True),
        ("DB_PASSWORD", True),
        ("routing_key", True),
        ("x-api-key", True),
        ("AccountKey", True),
        ("sessionToken", True),
        ("client_secret", True),
        ("authorization", True),
        ("credentials", True),
        ("sig", True),
        ("dedup_key", False),
        ("idempotency_key", False),
        ("groupKey", False),
        ("Key", False),
        ("FilterKeys", False),
        ("replay_key", False),
        ("task_instance_key_str", False),
        ("secretKeyRef", False),
        ("author", False),
        ("KeyError", False),
        ("log_url", False),
    ],
)
def test_secret_key_names(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


def test_entropy_decides_only_a_bare_key() -> None:
    assert looks_random("Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0L")
    assert not looks_random("order_id")
    assert redact_text("key=order_id") == "key=order_id"


def test_a_json_body_is_redacted_in_place_by_path_name_and_pattern() -> None:
    document = {
        "routing_key": "R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12",
        "payload": {"summary": "db login as jane.doe@example.com failed", "severity": "error"},
        "credentials": {"user": "svc-export", "pass": "n0t-in-the-db"},
        "env": [{"name": "LEDGER_API_TOKEN", "value": "s3cr3t-ledger-token"}, {"name": "REGION", "value": "eu"}],
        "dedup_key": "exp-42#failed",
        "labels": {"sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcFAKE0123": "a key in a key name"},
        "note": "the password s3cr3t-ledger-token leaked here too",
    }
    raw = json.dumps(document, indent=2).encode()

    stored = redact_body(raw, ("routing_key",))

    for secret in (
        "R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12",
        "jane.doe@example.com",
        "svc-export",
        "n0t-in-the-db",
        "s3cr3t-ledger-token",
        "sk_live_4eC39",
    ):
        assert secret not in stored
    parsed = json.loads(stored)
    assert parsed["dedup_key"] == "exp-42#failed" and parsed["env"][1] == {"name": "REGION", "value": "eu"}
    assert parsed["routing_key"] == redaction_token("R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12")
    assert stored.startswith('{\n  "routing_key"')  # patched in place: the sender's layout stays


def test_a_secret_used_as_a_key_is_redacted_and_its_value_kept() -> None:
    stored = redact_body(b'{"labels": {"password=Hunter2Hunter2 failed": "canary-42", "api_token": "t0k3n-v4lue"}}')

    assert json.loads(stored) == {
        "labels": {
            f"password={redaction_token('Hunter2Hunter2')} failed": "canary-42",
            "api_token": redaction_token("t0k3n-v4lue"),
        }
    }


def test_a_number_under_a_secret_name_rewrites_the_document() -> None:
    stored = redact_body(b'{"pin_code": 1, "password": 12345678, "job": "nightly"}')

    assert json.loads(stored) == {"pin_code": 1, "password": redaction_token("12345678"), "job": "nightly"}


def test_an_integrations_extra_names_apply_to_bodies_text_and_data() -> None:
    names = ["customer_ref"]
    body = redact_body(b'{"customer_ref": "CUST-7788-2291", "msg": "customer_ref=CUST-1111"}', (), names)

    assert "CUST-7788-2291" not in body and "CUST-1111" not in body
    with redaction_scope([], names):
        assert "CUST-2" not in redact_data({"customer_ref": "CUST-2"})["customer_ref"]


def test_a_cut_head_is_redacted_by_key_names_and_patterns() -> None:
    head = (
        '{"routing_key": "R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12", "event_action": "trigger", "payload": '
        '{"custom_details": {"password": "hunter2hunter2", "api_key": 424242424242, "mail": "ops@example.com", '
        '"note": "sk_live_' + "4eC39HqLyjWDarjtT1zdp7dcFAKE0123" + '", "error": "cut in the middle of a stri'
    ).encode()

    stored = redact_body(head, ("routing_key",))

    for secret in ("R0UT1NGKEY", "hunter2hunter2", "424242424242", "ops@example.com", "sk_live_4eC3"):
        assert secret not in stored
    assert '"event_action": "trigger"' in stored and "cut in the middle" in stored


def test_the_posts_own_secret_values_are_found_for_its_free_text() -> None:
    raw = b'{"token": "tok-9c2d7e41b3a8f6", "error": "refused tok-9c2d7e41b3a8f6"}'
    values = body_secret_values(raw)

    with redaction_scope(values):
        assert redact_text("the gateway refused tok-9c2d7e41b3a8f6") == (
            f"the gateway refused {redaction_token('tok-9c2d7e41b3a8f6')}"
        )


# --- ingestion -------------------------------------------------------------------------------------


@pytest.fixture
def generic_key(story_tenants: dict[str, Any], make_key: Any) -> str:
    return make_key("generic", tenants=list(story_tenants.values()))


def _document(**changes: Any) -> dict[str, Any]:
    document = json.loads(fixture_path("generic", "01-first-failure.json").read_bytes())
    document.update(changes)
    return document


@pytest.mark.django_db
def test_two_posts_with_the_same_secret_are_still_one_alert_and_a_duplicate(post_alert: Any, generic_key: str) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    document = _document(execution_id=f"exp-{secret}", error=f"clone with {secret} refused")

    first = post_alert("generic", document, generic_key).json()["alerts"][0]
    second = post_alert("generic", document, generic_key).json()["alerts"][0]

    assert (first["outcome"], second["outcome"]) == ("accepted", "duplicate")
    alerts = list(Alert.objects.order_by("id"))
    assert alerts[1].duplicate_of_id == alerts[0].pk and alerts[0].dedup_hash == alerts[1].dedup_hash
    attempt = Attempt.objects.get()
    assert attempt.execution_id == f"exp-{redaction_token(secret)}"
    for row in (*alerts, attempt, *Delivery.objects.all(), *TimelineEvent.objects.all()):
        assert secret not in json.dumps([str(v) for v in vars(row).values()])


@pytest.mark.django_db
def test_a_reprocessed_body_names_the_same_attempt_as_a_raw_post(
    post_alert: Any, generic_key: str, story_job: Any
) -> None:
    from runs.alerts.triage import alert_reprocess

    secret = "jane.doe@example.com"
    document = _document(execution_id=f"exp-42/{secret}", job="later-job")
    waiting = post_alert("generic", document, generic_key).json()["alerts"][0]
    assert waiting["outcome"] == "unmatched"
    job_get_or_create(key="later-job", defaults={"schedule": "0 2 * * *", "timezone": "Europe/Berlin"})

    reprocessed = alert_reprocess(alert=Alert.objects.get(public_id=waiting["id"]))  # from the stored body
    later = post_alert("generic", {**document, "status": "timed_out"}, generic_key).json()["alerts"][0]

    assert (reprocessed.outcome, later["outcome"]) == ("accepted", "accepted")
    attempt = Attempt.objects.get()  # one attempt: the stored body and the raw post name the same one
    assert attempt.execution_id == f"exp-42/{redaction_token(secret)}"
    assert later["attempt"] == str(attempt.public_id) == str(reprocessed.attempt.public_id)


@pytest.mark.django_db
def test_an_attempts_log_link_and_error_are_stored_redacted(post_alert: Any, generic_key: str) -> None:
    document = _document(
        log_url="https://ops:hunter2@logs.example.com/q?user=jane.doe@example.com&token=abc123abc123",
        error="POST failed: Authorization: Bearer abcDEF123456ghiJKL789 for jane.doe@example.com",
    )

    assert post_alert("generic", document, generic_key).status_code == 202

    attempt = Attempt.objects.get()
    for secret in ("hunter2", "jane.doe@example.com", "abc123abc123", "abcDEF123456ghiJKL789"):
        assert secret not in attempt.log_url and secret not in attempt.error_summary
    assert attempt.log_url.startswith("https://") and "logs.example.com/q?" in attempt.log_url
    alert = Alert.objects.get()
    assert "jane.doe@example.com" not in json.dumps(alert.fields)


@pytest.mark.django_db
@override_settings(HANDOVER_MAX_BODY_BYTES=4096)
def test_an_oversized_posts_kept_head_is_redacted(post_alert: Any, make_key: Any, story_tenants: Any) -> None:
    key = make_key("pagerduty", tenants=list(story_tenants.values()))
    routing = "R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12"
    body = json.dumps(
        {
            "routing_key": routing,
            "event_action": "trigger",
            "payload": {"summary": "x" * 10, "custom_details": {"password": "hunter2hunter2", "pad": "y" * 8000}},
        }
    ).encode()

    response = post_alert("pagerduty", body, key)

    assert response.status_code == 413
    delivery = Delivery.objects.get()
    assert delivery.is_body_truncated and delivery.size_bytes == len(body)
    assert routing not in delivery.body and "hunter2hunter2" not in delivery.body
    assert redaction_token(routing) in delivery.body and '"event_action": "trigger"' in delivery.body
