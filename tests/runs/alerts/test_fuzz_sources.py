"""Property-based fuzzing of every alert source through the real endpoint (rule 9 in docs/architecture.md).

For each source the fuzzer takes that source's own fixtures (``runs/demo/alerts/<source>/``; for
``custom`` the stories and mappings in ``tests/data/custom/``), mutates one to three of their LEAVES
with hostile values -- NUL, lone surrogates, RTL and zero-width characters, 10k-character strings,
SQL/HTML/JSON-looking text, huge and negative integers, NaN-like strings and NaN itself, dates in
year 1 and 9999, a wrong type at a leaf, or deep nesting injected at one leaf -- so the records keep
their shape, and posts each through ``POST /api/v1/alerts/<source>/`` with a key bound to all
tenants. Every post must answer 202 or a 4xx (never a 5xx), its Delivery must end ``processed`` or
``rejected`` (never ``received``), a 202 must hold as many Alert rows as the parser reports records,
none of them ``pending``, and across the run at least half of the alerts must reach apply
(``accepted``, ``unmatched`` or ``duplicate``): a parser that refuses everything fails.

A second test posts raw bytes (random bytes, truncated JSON, UTF-16 with and without BOM, NUL
bytes, invalid UTF-8): always 400 or 202, stored, final.

Failures are collected per group (the first example of each is kept) and reported together at the
end, so one run names every kind of breakage. Seeded: ``HANDOVER_FUZZ_SEED`` replays a run (the seed
is printed with the counts); ``HANDOVER_FUZZ_EXAMPLES`` sets the examples per source. Marked
``slow`` (runs once, on PostgreSQL, in CI); runs on SQLite too. Uses committed transactions
(``transaction=True``) so one post's database error cannot poison the next example.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import resource
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.test import Client
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from runs.alerts.mapping import integration_custom_create_with_key
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import FormatError, merged_settings
from runs.alerts.parsers.registry import get_adapter
from runs.catalog.models import Integration, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create
from tests.conftest import FIXTURES

# CI replays one known seed, so a submission is never turned red by an unrelated draw; anywhere else a
# fresh seed explores (and is printed, so a finding can be replayed with HANDOVER_FUZZ_SEED).
CI_SEED = 20261201
SEED = int(
    os.environ.get("HANDOVER_FUZZ_SEED")
    or (CI_SEED if os.environ.get("CI") == "true" else random.SystemRandom().randrange(2**32))
)
EXAMPLES = int(os.environ.get("HANDOVER_FUZZ_EXAMPLES", "80"))
RAW_EXAMPLES = int(os.environ.get("HANDOVER_FUZZ_RAW_EXAMPLES", "30"))
RECEIVED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)  # the fixtures' night is two days before
# A post (or a parse) that takes longer is stopped and reported: a hostile count (``status.failed:
# 2**63``) must not hang or exhaust the machine, and the suite must stay within its budget.
POST_SECONDS = float(os.environ.get("HANDOVER_FUZZ_POST_SECONDS", "10"))
CUSTOM_DATA = Path(__file__).resolve().parent.parent.parent / "data" / "custom"
PAGERDUTY_PLACEHOLDER = "R0ACMEF00DSPR0DBATCHJ0BS00000001"
# source label -> (source slug, folder with its fixtures, custom mapping folder or None)
SOURCES = {
    "generic": ("generic", FIXTURES / "generic", None),
    "alertmanager": ("alertmanager", FIXTURES / "alertmanager", None),
    "grafana": ("grafana", FIXTURES / "grafana", None),
    "eventbridge-scheduler": ("eventbridge-scheduler", FIXTURES / "eventbridge-scheduler", None),
    "airflow": ("airflow", FIXTURES / "airflow", None),
    "pagerduty": ("pagerduty", FIXTURES / "pagerduty", None),
    "kubernetes": ("kubernetes", FIXTURES / "kubernetes", None),
    "custom-nomad": ("custom", CUSTOM_DATA / "nomad", "nomad"),
    "custom-jenkins": ("custom", CUSTOM_DATA / "jenkins", "jenkins"),
}
FINAL_DELIVERY = {Delivery.Outcome.PROCESSED, Delivery.Outcome.REJECTED}
APPLIED = {Alert.Outcome.ACCEPTED, Alert.Outcome.UNMATCHED, Alert.Outcome.DUPLICATE}
DEEP = "\u2063DEEP\u2063"  # a sentinel string leaf, replaced by deep nesting after serialising

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


# --- the hostile values ----------------------------------------------------------------------------

HOSTILE_TEXT = [
    "\x00",
    "a\x00b",
    "\ud800",
    "tail \udfff",
    "\u202eevil\u202c",
    "zero\u200bwidth\ufeff",
    "\u0000\u0000\u0000",
    "A" * 10_000,
    "é" * 5_001,
    "'; DROP TABLE runs_alert; --",
    '" OR 1=1 --',
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '{"status": "succeeded", "job": "x"}',
    '[1, 2, {"a": null}]',
    "NaN",
    "Infinity",
    "-inf",
    "1e309",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999+14:00",
    "0000-00-00T00:00:00",
    "2026-02-30T25:61:61Z",
    "2026-11-28T02:00:00",
    "",
    " ",
    "\n\r\t",
    "javascript:alert(1)",
    "https://" + "x" * 3000 + ".example/",
    "%00%ff%fe",
    "\\u0000",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🧨",
]
HOSTILE_NUMBERS: list[Any] = [
    2**31,
    2**31 - 1,
    -(2**31) - 1,
    2**63,
    2**63 - 1,
    -(2**63) - 1,
    2**64,
    10**30,
    -1,
    0,
    -0.0,
    1.5,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    253402300800000,  # year 10000 in epoch milliseconds
    -62135596801,  # before year 1 in epoch seconds
]
WRONG_TYPES: list[Any] = [None, True, False, [], {}, ["x"], {"a": "b"}]


def hostile_value() -> st.SearchStrategy[Any]:
    """One hostile leaf value: text, a number, a wrong type, deep nesting, or random text."""
    return st.one_of(
        st.sampled_from(HOSTILE_TEXT),
        st.sampled_from(HOSTILE_NUMBERS),
        st.sampled_from(WRONG_TYPES),
        st.just(DEEP),
        st.text(min_size=0, max_size=40),
        st.integers(min_value=-(2**70), max_value=2**70),
    )


# --- documents and their leaves --------------------------------------------------------------------


def leaves(document: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every leaf path of a JSON document (keys and list indexes)."""
    if isinstance(document, dict):
        for key, value in document.items():
            yield from leaves(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from leaves(value, (*path, index))
    else:
        yield path


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``document`` with the leaf at ``path`` replaced (an embedded JSON string is kept a string)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(document, dict):
        return {k: (replaced(v, rest, value) if k == head else v) for k, v in document.items()}
    return [replaced(v, rest, value) if i == head else v for i, v in enumerate(document)]


def serialise(document: Any, *, ascii_only: bool, depth: int) -> bytes:
    """JSON bytes; lone surrogates force ASCII escapes; the DEEP sentinel becomes ``depth`` nested lists."""
    text = json.dumps(document, ensure_ascii=True)
    if not ascii_only:
        candidate = json.dumps(document, ensure_ascii=False)
        try:
            candidate.encode()
            text = candidate
        except UnicodeEncodeError:
            pass
    sentinel = json.dumps(DEEP, ensure_ascii=True)
    if sentinel in text or json.dumps(DEEP, ensure_ascii=False) in text:
        deep = "[" * depth + '"deep"' + "]" * depth
        text = text.replace(sentinel, deep).replace(json.dumps(DEEP, ensure_ascii=False), deep)
    return text.encode("utf-8")


@dataclass
class Fixture:
    name: str
    raw: bytes
    document: Any
    paths: list[tuple[Any, ...]]


def source_fixtures(label: str, key: str) -> list[Fixture]:
    """The source's fixture files that are JSON documents (PagerDuty's carry the issued key)."""
    _, folder, custom = SOURCES[label]
    found = []
    for path in sorted(folder.glob("*.json")):
        if custom and path.name == "mapping.json":
            continue
        raw = path.read_bytes()
        if label == "pagerduty":
            raw = raw.replace(PAGERDUTY_PLACEHOLDER.encode(), key.encode())
        try:
            document = json.loads(raw)
        except ValueError:
            continue
        paths = [p for p in leaves(document) if p]
        if paths:
            found.append(Fixture(path.name, raw, document, paths))
    return found


def raw_bodies(label: str) -> list[bytes]:
    """Every fixture file of the source as bytes (also those that are not JSON)."""
    _, folder, custom = SOURCES[label]
    return [p.read_bytes() for p in sorted(folder.glob("*.json")) if not (custom and p.name == "mapping.json")]


# --- the world -------------------------------------------------------------------------------------


@pytest.fixture
def memory_cap() -> Iterator[None]:
    """Cap this process's address space at its size now plus ``HANDOVER_FUZZ_MEMORY_MIB`` while fuzzing.

    A hostile count can make a parser allocate without end (one object per reported pod); with the
    cap that allocation ends in ``MemoryError`` (a 5xx, reported) instead of the machine's OOM killer.
    """
    status = Path("/proc/self/status")
    if not status.exists():
        yield
        return
    size_kib = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size_kib * 1024 + int(os.environ.get("HANDOVER_FUZZ_MEMORY_MIB", "3072")) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class TimeLimitExceeded(Exception):
    """Raised in the test's own thread when a post or a parse runs past ``POST_SECONDS``."""


@contextmanager
def time_limit(seconds: float, fired: list[bool]) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (SIGALRM; the main thread); ``fired`` records that it did."""

    def interrupt(signum: int, frame: Any) -> None:
        fired.append(True)
        raise TimeLimitExceeded(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Sender:
    """One source's integration, a key bound to all tenants, and a client that never raises."""

    label: str
    source: str
    integration: Integration
    key: str
    client: Client = field(default_factory=lambda: Client(raise_request_exception=False))

    def post(self, body: bytes, fired: list[bool], content_type: str = "application/json") -> Any:
        with time_machine.travel(RECEIVED, tick=True), time_limit(POST_SECONDS, fired):
            return self.client.post(
                f"/api/v1/alerts/{self.source}/",
                data=body,
                content_type=content_type,
                HTTP_AUTHORIZATION=f"Bearer {self.key}",
            )

    def parsed_count(self, body: bytes) -> int | str:
        """How many records the source's parser reports for ``body`` (``"format"`` for a FormatError)."""
        adapter = get_adapter(self.source)
        assert adapter is not None
        options = merged_settings(adapter.DEFAULT_SETTINGS, self.integration.settings)
        try:
            with time_limit(POST_SECONDS, []):
                return len(adapter.parse(body, settings=options, received_at=RECEIVED).alerts)
        except FormatError:
            return "format"
        except TimeLimitExceeded:
            return f"parser ran over {POST_SECONDS} s"
        except (Exception, MemoryError) as exc:  # noqa: BLE001 - a parser crash is a finding, reported by group
            return f"parser raised {type(exc).__name__}"


def make_sender(label: str, story_tenants: dict[str, Tenant]) -> Sender:
    source, _, custom = SOURCES[label]
    if custom:
        mapping = json.loads((CUSTOM_DATA / custom / "mapping.json").read_text())
        integration, issued = integration_custom_create_with_key(
            name=f"fuzz-{custom}", mapping=mapping, all_tenants=True, label="fuzz"
        )
        return Sender(label, source, integration, issued.key)
    integration = integration_get_or_create(source=source, name=f"fuzz-{source}")
    return Sender(label, source, integration, integration_key_create(integration=integration, all_tenants=True).key)


@dataclass
class Tally:
    """What a run saw: cases, alerts, server errors, stuck rows, and the first example of each failure group."""

    cases: int = 0
    alerts: int = 0
    applied: int = 0
    server_errors: int = 0
    stuck: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)
    failure_counts: Counter[str] = field(default_factory=Counter)

    def fail(self, group: str, example: str) -> None:
        self.failure_counts[group] += 1
        self.failures.setdefault(group, example[:600])

    def report(self, name: str) -> str:
        lines = [f"{name}: {sum(self.failure_counts.values())} failures in {len(self.failures)} groups"]
        for group, example in sorted(self.failures.items()):
            lines.append(f"  [{self.failure_counts[group]}x] {group}\n      e.g. {example}")
        return "\n".join(lines)


def short(body: bytes) -> str:
    text = body.decode("utf-8", errors="backslashreplace")
    return text if len(text) <= 300 else text[:300] + f"... ({len(body)} bytes)"


def check_post(sender: Sender, tally: Tally, body: bytes, describe: str, *, allowed: set[int] | None = None) -> None:
    """Post ``body`` and check rule 9's promises; record failures in ``tally`` (never raises)."""
    before = Delivery.objects.order_by("-id").values_list("id", flat=True).first() or 0
    expected = sender.parsed_count(body)
    if isinstance(expected, str) and expected.startswith("parser ran over"):
        # the endpoint would spend the same time (or memory) in the same parser: not posted
        tally.cases += 1
        tally.fail(f"{sender.label}: {expected} (not posted)", describe)
        return
    fired: list[bool] = []
    try:
        response = sender.post(body, fired)
    except TimeLimitExceeded:
        fired.append(True)
        response = None
    tally.cases += 1
    if fired or response is None:
        tally.fail(f"{sender.label}: the post ran over {POST_SECONDS} s (stopped)", describe)
        return
    status = response.status_code
    tally.statuses[status] += 1
    what = f"{describe} -> {status}"
    if isinstance(expected, str) and expected.startswith("parser "):
        tally.fail(f"{sender.label}: {expected}", what)
    if status >= 500:
        tally.server_errors += 1
        tally.fail(f"{sender.label}: answered {status}", what)
    elif allowed is not None and status not in allowed:
        tally.fail(f"{sender.label}: answered {status} (expected {sorted(allowed)})", what)
    elif not (status == 202 or 400 <= status < 500):
        tally.fail(f"{sender.label}: answered {status} (neither 202 nor 4xx)", what)
    deliveries = list(Delivery.objects.filter(id__gt=before, integration=sender.integration))
    if status in (401, 403, 404, 429):
        return  # not authenticated for this source: nothing is stored
    if len(deliveries) != 1:
        tally.fail(f"{sender.label}: {len(deliveries)} deliveries stored for one post", what)
        return
    delivery = deliveries[0]
    if delivery.outcome not in FINAL_DELIVERY:
        tally.stuck += 1
        tally.fail(f"{sender.label}: delivery left {delivery.outcome!r}", what)
    alerts = list(Alert.objects.filter(delivery=delivery))
    tally.alerts += len(alerts)
    tally.applied += sum(alert.outcome in APPLIED for alert in alerts)
    pending = [alert for alert in alerts if alert.outcome == Alert.Outcome.PENDING]
    if pending:
        tally.stuck += len(pending)
        tally.fail(f"{sender.label}: alert left pending", what)
    if status == 202 and isinstance(expected, int) and len(alerts) != expected:
        tally.fail(f"{sender.label}: {len(alerts)} Alert rows for {expected} parsed records", what)
    if status == 202 and delivery.outcome != Delivery.Outcome.PROCESSED:
        tally.fail(f"{sender.label}: 202 but delivery {delivery.outcome!r}", what)


@st.composite
def mutated_posts(draw: st.DrawFn, fixtures: list[Fixture]) -> tuple[bytes, str]:
    """A fixture with one to three leaves replaced by hostile values, serialised; and its description."""
    fixture = draw(st.sampled_from(fixtures))
    document = fixture.document
    chosen = draw(st.lists(st.sampled_from(fixture.paths), min_size=1, max_size=3, unique=True))
    changes = []
    for path in chosen:
        value = draw(hostile_value())
        document = replaced(document, path, value)
        shown = repr(value)
        changes.append(f"{'.'.join(map(str, path))}={shown[:80]}{'...' if len(shown) > 80 else ''}")
    depth = draw(st.sampled_from([65, 300, 1_000, 20_000]))
    body = serialise(document, ascii_only=draw(st.booleans()), depth=depth)
    deep = f" (deep={depth})" if DEEP in " ".join(changes) else ""
    return body, f"{fixture.name}: {'; '.join(changes)}{deep}"


@st.composite
def raw_posts(draw: st.DrawFn, bodies: list[bytes]) -> tuple[bytes, str]:
    """Raw bytes: random, truncated JSON, UTF-16 (with/without BOM), NUL bytes, invalid UTF-8."""
    base = draw(st.sampled_from(bodies))
    kind = draw(st.sampled_from(["random", "truncated", "utf16-bom", "utf16-nobom", "utf16be", "nul", "invalid-utf8"]))
    if kind == "random":
        body = draw(st.binary(min_size=0, max_size=200))
    elif kind == "truncated":
        body = base[: draw(st.integers(min_value=0, max_value=max(len(base) - 1, 0)))]
    elif kind == "utf16-bom":
        body = base.decode("utf-8", errors="replace").encode("utf-16")
    elif kind == "utf16-nobom":
        body = base.decode("utf-8", errors="replace").encode("utf-16-le")
    elif kind == "utf16be":
        body = base.decode("utf-8", errors="replace").encode("utf-16-be")
    else:
        where = draw(st.integers(min_value=0, max_value=len(base)))
        junk = b"\x00" if kind == "nul" else draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80\x80"]))
        body = base[:where] + junk + base[where:]
    return body, f"{kind}: {short(body)}"


def summary_line(kind: str, label: str, tally: Tally) -> str:
    return (
        f"{kind} source={label} cases={tally.cases} seed={SEED} 5xx={tally.server_errors} "
        f"stuck={tally.stuck} applied={tally.applied}/{tally.alerts} statuses={dict(sorted(tally.statuses.items()))}"
    )


FUZZ_SETTINGS = settings(
    derandomize=False,
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("label", list(SOURCES))
def test_fuzzed_leaves_end_final_and_never_answer_5xx(
    label: str, story_tenants: dict[str, Tenant], request: pytest.FixtureRequest, memory_cap: None
) -> None:
    sender = make_sender(label, story_tenants)
    fixtures = source_fixtures(label, sender.key)
    assert fixtures, f"{label}: no JSON fixtures"
    tally = Tally()

    @FUZZ_SETTINGS
    @seed(SEED)
    @given(post=mutated_posts(fixtures))
    def run(post: tuple[bytes, str]) -> None:
        body, describe = post
        check_post(sender, tally, body, describe)

    run()
    # the unmutated fixtures too, once: the baseline every mutation is compared with
    for fixture in fixtures:
        check_post(sender, tally, fixture.raw, f"{fixture.name}: as shipped")
    line = summary_line("fuzz", label, tally)
    print(line)
    _summary(request, line)
    if tally.alerts and tally.applied * 2 < tally.alerts:
        tally.fail(
            f"{label}: fewer than half the alerts reached apply",
            f"applied {tally.applied} of {tally.alerts} alerts",
        )
    assert not tally.failures, line + "\n" + tally.report(label)


@pytest.mark.parametrize("label", list(SOURCES))
def test_raw_bytes_are_stored_final_and_answer_400_or_202(
    label: str, story_tenants: dict[str, Tenant], request: pytest.FixtureRequest, memory_cap: None
) -> None:
    sender = make_sender(label, story_tenants)
    bodies = raw_bodies(label)
    tally = Tally()

    @settings(FUZZ_SETTINGS, max_examples=RAW_EXAMPLES)
    @seed(SEED)
    @given(post=raw_posts(bodies))
    def run(post: tuple[bytes, str]) -> None:
        body, describe = post
        check_post(sender, tally, body, describe, allowed={202, 400})

    run()
    line = summary_line("fuzz-raw", label, tally)
    print(line)
    _summary(request, line)
    assert not tally.failures, line + "\n" + tally.report(label)


def _summary(request: pytest.FixtureRequest, line: str) -> None:
    """Leave the line for the run's summary (tests/conftest.py prints ``handover_summary_lines``)."""
    config = request.config
    config.handover_summary_lines = [*getattr(config, "handover_summary_lines", []), line]  # type: ignore[attr-defined]


def test_hostile_values_cover_the_brief() -> None:
    """The hostile set names every kind of value the fuzzer promises (a guard against silent trimming)."""
    texts = "".join(HOSTILE_TEXT)
    assert "\x00" in texts and "\ud800" in texts and "\u202e" in texts and "\u200b" in texts
    assert any(len(t) >= 10_000 for t in HOSTILE_TEXT)
    assert any(re.search(r"DROP TABLE", t) for t in HOSTILE_TEXT) and any("<script>" in t for t in HOSTILE_TEXT)
    assert {2**31, 2**63} <= {n for n in HOSTILE_NUMBERS if isinstance(n, int)}
    assert any(isinstance(n, float) and math.isnan(n) for n in HOSTILE_NUMBERS)
    assert any(t.startswith("0001-") for t in HOSTILE_TEXT) and any(t.startswith("9999-") for t in HOSTILE_TEXT)
