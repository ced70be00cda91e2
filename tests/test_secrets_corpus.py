"""The secrets corpus, end to end: no secret is stored or shown, every harmless canary beside one is.

``tests/data/secrets/corpus.json`` holds fake secrets of every shape rule 8 (docs/architecture.md)
names -- cloud, VCS, chat, payment, mail and package-registry tokens, JWTs, a PEM block, URLs with
user info or secret query parameters, ``name=value`` pairs, bearer values, card numbers, e-mail
addresses, our own integration keys and URL-key paths, Apprise URLs. Each is posted through EVERY
source (the seven adapters and ``custom`` with both mappings in ``tests/data/custom/``) in every
kind of field the source has:

- ``text``: identity-free text (error, summary, description, exception, message, log lines);
- ``link``: log links and other URLs the source reads;
- ``note``: a value under a key whose name does not look secret;
- ``secret_key``: a value under a key whose name does (``api_token``);
- ``key_name``: the secret as a key's NAME;
- ``label``: a label value (sources with labels);
- ``oversized``: the 413 path, every secret inside the kept first 64 KiB.

Each secret has a unique harmless canary beside it (``canary-<uuid4>``). Then every canary must be
found in the database and on the page a support person sees for its alert (the 413 head: on the
delivery's admin page), and NO secret -- plain, JSON-escaped, URL-encoded, HTML-escaped or UTF-16
-- may be found in: the database (every text column of every table), the database's raw bytes
(SQLite: the serialised database image, and the file with its ``-wal`` when the database is a file;
PostgreSQL: ``pg_dump`` of the test database, skipped with a reason when ``pg_dump`` is missing), the
logs (every logger at DEBUG), the pages a support person sees (run pages, inbox, alert pages), API
answers (``/api/v1/alerts/``, ``/api/v1/runs/<id>/``), the Markdown export of a handover drafted
from each run, and the admin change pages. Every finding is collected and reported at the end,
grouped by location. Marked ``slow``; committed transactions so ``pg_dump`` sees the rows.
"""

from __future__ import annotations

import html
import json
import logging
import re
import shutil
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
import time_machine
from django.apps import apps
from django.db import connection
from django.test import Client
from django.urls import reverse

from handover.core.errors import DomainError
from handover.handovers.services import handover_create
from runs.alerts.mapping import integration_custom_create_with_key
from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create, role_grant
from runs.timeline.models import TimelineEvent
from tests.conftest import FIXTURES
from tests.factories import UserFactory

DATA = Path(__file__).resolve().parent / "data"
CORPUS: list[dict[str, Any]] = json.loads((DATA / "secrets" / "corpus.json").read_text())["secrets"]
RECEIVED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
PAGERDUTY_PLACEHOLDER = "R0ACMEF00DSPR0DBATCHJ0BS00000001"
MAX_BODY = 100_000  # the size limit during this test: an oversized post is cheap to build
Path_ = tuple[Any, ...]


@dataclass(frozen=True)
class SourceSpec:
    """Where a source's fixture has each kind of field (paths of keys and list indexes)."""

    source: str
    base: Path
    text: tuple[Path_, ...] = ()
    link: tuple[Path_, ...] = ()
    container: Path_ = ()  # an object extra keys can be added to
    labels: Path_ | None = None
    wrap: Callable[[str], Any] | None = None  # how a value sits in the container (EventBridge attributes)
    mapping: str | None = None
    # the execution's identity (and the source's dedup inputs): varied per post so that every post is
    # a new attempt and its text reaches the attempt, the timeline and the handover, not only the body
    vary: tuple[Path_, ...] = ()


def _eventbridge_attribute(value: str) -> dict[str, str]:
    return {"StringValue": value, "DataType": "String"}


SPECS = {
    "generic": SourceSpec(
        "generic",
        FIXTURES / "generic" / "01-first-failure.json",
        text=(("error",), ("config_version",)),
        link=(("log_url",),),
        vary=(("execution_id",),),
    ),
    "alertmanager": SourceSpec(
        "alertmanager",
        FIXTURES / "alertmanager" / "01-first-failure.json",
        text=(
            ("alerts", 0, "annotations", "description"),
            ("alerts", 0, "annotations", "error"),
            ("alerts", 0, "annotations", "summary"),
        ),
        link=(("alerts", 0, "annotations", "log_url"), ("alerts", 0, "generatorURL")),
        container=("alerts", 0, "annotations"),
        labels=("alerts", 0, "labels"),
        vary=(("alerts", 0, "labels", "execution_id"), ("alerts", 0, "fingerprint"), ("commonLabels", "execution_id")),
    ),
    "grafana": SourceSpec(
        "grafana",
        FIXTURES / "grafana" / "01-first-failure.json",
        text=(("alerts", 0, "annotations", "description"), ("alerts", 0, "annotations", "summary"), ("message",)),
        link=(("alerts", 0, "generatorURL"), ("alerts", 0, "panelURL")),
        container=("alerts", 0, "annotations"),
        labels=("alerts", 0, "labels"),
        vary=(("alerts", 0, "fingerprint"),),
    ),
    "eventbridge-scheduler": SourceSpec(
        "eventbridge-scheduler",
        FIXTURES / "eventbridge-scheduler" / "01-exhausted-retries-receive-message.json",
        text=(("Messages", 0, "MessageAttributes", "ERROR_MESSAGE", "StringValue"),),
        container=("Messages", 0, "MessageAttributes"),
        wrap=_eventbridge_attribute,
        vary=(("Messages", 0, "MessageId"), ("Messages", 0, "MessageAttributes", "EXECUTION_ID", "StringValue")),
    ),
    "airflow": SourceSpec(
        "airflow",
        FIXTURES / "airflow" / "02-task-failure-callback.json",
        text=(("exception",), ("exception_type",)),
        link=(("task_instance", "log_url"),),
        container=("conf",),
        labels=("params",),
        vary=(("task_instance", "try_number"),),
    ),
    "pagerduty": SourceSpec(
        "pagerduty",
        FIXTURES / "pagerduty" / "01-trigger-attempt1.json",
        text=(("payload", "summary"), ("payload", "custom_details", "error")),
        link=(("links", 0, "href"), ("client_url",)),
        container=("payload", "custom_details"),
        vary=(("payload", "custom_details", "execution_id"), ("dedup_key",)),
    ),
    "kubernetes": SourceSpec(
        "kubernetes",
        FIXTURES / "kubernetes" / "02-job-failed-backoff-limit.json",
        text=(("status", "conditions", 1, "message"),),
        container=("metadata", "annotations"),
        labels=("metadata", "labels"),
        vary=(("metadata", "uid"),),
    ),
    "custom-nomad": SourceSpec(
        "custom",
        DATA / "custom" / "nomad" / "01-first-failure.json",
        text=(("Events", 2, "Payload", "Allocation", "TaskStates", "export", "Events", 2, "DisplayMessage"),),
        container=("Events", 2, "Payload", "Allocation"),
        mapping="nomad",
        vary=(("Events", 1, "Payload", "Allocation", "ID"), ("Events", 2, "Payload", "Allocation", "ID")),
    ),
    "custom-jenkins": SourceSpec(
        "custom",
        DATA / "custom" / "jenkins" / "02-completed-failure.json",
        text=(("build", "log"), ("build", "notes")),
        link=(("build", "full_url"),),
        container=("build", "parameters"),
        mapping="jenkins",
        vary=(("build", "number"),),
    ),
}


# --- building bodies -------------------------------------------------------------------------------


def with_value(document: Any, path: Path_, value: Any) -> Any:
    """A copy of ``document`` with ``path`` set to ``value``."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(document, list):
        return [with_value(v, rest, value) if i == head else v for i, v in enumerate(document)]
    copy = dict(document)
    copy[head] = with_value(document.get(head, {}), rest, value)
    return copy


def with_keys(document: Any, path: Path_, extra: dict[str, Any]) -> Any:
    """A copy of ``document`` with ``extra`` keys added to the object at ``path``."""
    target = document
    for part in path:
        target = target[part]
    return with_value(document, path, {**target, **extra})


def canary() -> str:
    """A harmless, unique marker a person may search by (a UUID: no detector may eat it)."""
    return f"canary-{uuid.uuid4()}"


def link_for(entry: dict[str, Any], mark: str) -> str:
    """A URL carrying the secret: the corpus URL itself, or a log search for the secret's text."""
    if entry["is_url"]:
        url = str(entry["text"])
        if url.startswith("slack://"):
            return f"{url}?ref={mark}"
        return f"{url}{'&' if '?' in url else '?'}ref={mark}"
    return f"https://logs.example.com/{mark}/search?q={quote(entry['text'], safe='')}"


@dataclass
class Post:
    """One body to post: which source, secret and field kinds, and the canaries it carries (canary -> kind)."""

    label: str
    secret: str
    body: bytes
    canaries: dict[str, str]
    oversized: bool = False
    status: int = 0
    delivery: Delivery | None = None


def posts_for(label: str, spec: SourceSpec, key: str) -> list[Post]:
    """Two posts per secret (its fields; its container) and one oversized post with every secret."""
    base = json.loads(spec.base.read_text())
    if spec.source == "pagerduty":
        base["routing_key"] = key
    wrap = spec.wrap or (lambda value: value)
    posts = []
    serial = 0

    def varied(document: Any) -> Any:
        """The document as a new execution: each path in ``spec.vary`` gets a new value."""
        nonlocal serial
        serial += 1
        for path in spec.vary:
            value = base
            for part in path:
                value = value[part]
            new = value + serial if isinstance(value, int) else f"{value}-v{serial}"
            document = with_value(document, path, new)
        return document

    for entry in CORPUS:
        text = entry["text"]
        marks: dict[str, str] = {}
        document = varied(base)
        for path in spec.text:
            mark = canary()
            marks[mark] = "text"
            document = with_value(document, path, f"{mark} failed: {text}")
        for path in spec.link:
            mark = canary()
            marks[mark] = "link"
            document = with_value(document, path, link_for(entry, mark))
        if marks:
            posts.append(Post(label, entry["name"], json.dumps(document, ensure_ascii=False).encode(), marks))
        marks = {}
        note, beside, named = canary(), canary(), canary()
        marks.update({note: "note", beside: "secret_key", named: "key_name"})
        extra = {"note": wrap(f"{note} {text}"), "api_token": wrap(text), "ref": wrap(beside), text: wrap(named)}
        document = with_keys(varied(base), spec.container, extra)
        if spec.labels is not None:
            mark = canary()
            marks[mark] = "label"
            document = with_keys(document, spec.labels, {"owner_note": f"{mark} {text}"})
        posts.append(Post(label, entry["name"], json.dumps(document, ensure_ascii=False).encode(), marks))
    # the 413 path: every secret (as free text and under a secret-looking key) inside the kept head
    marks = {}
    notes = []
    for entry in CORPUS:
        mark = canary()
        marks[mark] = "oversized"
        notes.append({"note": f"{mark} {entry['text']}", "password": entry["text"]})
    document = {**base, "zz_notes": notes, "zz_padding": "x" * (MAX_BODY + 1000)}
    body = json.dumps(document, ensure_ascii=False).encode()
    assert body.index(b"zz_padding") < 64 * 1024, "the secrets must sit in the kept head"
    posts.append(Post(label, "(all)", body, marks, oversized=True))
    return posts


# --- where secrets may hide ------------------------------------------------------------------------


def secret_forms(secret: str) -> set[str]:
    """The secret as text may carry it: plain, JSON-escaped, URL-encoded, HTML-escaped; cards also as digits."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
        html.escape(secret),
        html.escape(secret, quote=False),
    }
    digits = secret.replace(" ", "").replace("-", "")
    if digits.isdigit():
        forms.add(digits)
    return {form for form in forms if len(form) >= 8}


UUID_OR_NUMBER = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<=/)\d+(?=/)")


@dataclass
class Findings:
    """Secrets found per location and place, canaries missing per kind, and what was looked at."""

    # location -> place (a column, a page's path with ids as <id>) -> secret names
    secrets: dict[str, dict[str, set[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    canaries: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))  # where -> kind -> example
    looked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    names: dict[str, set[str]] = field(default_factory=dict)  # secret name -> its text forms
    missing: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    def lost(self, where: str, group: str, example: str) -> None:
        """Record a canary (or a post) that is not where it must be: one example and a count per group."""
        self.missing[(where, group)] += 1
        self.canaries[where].setdefault(group, example)

    def scan(self, location: str, where: str, text: str) -> None:
        self.looked[location] += 1
        place = UUID_OR_NUMBER.sub("<id>", where)
        for name, forms in self.names.items():
            if any(form in text for form in forms):
                self.secrets[location][place].add(name)

    def scan_bytes(self, location: str, where: str, data: bytes) -> None:
        self.looked[location] += 1
        for name, forms in self.names.items():
            for form in forms:
                if any(form.encode(codec) in data for codec in ("utf-8", "utf-16-le", "utf-16-be")):
                    self.secrets[location][where].add(name)
                    break

    def report(self) -> str:
        lines = []
        for location, places in sorted(self.secrets.items()):
            found = set().union(*places.values()) if places else set()
            if not found:
                continue
            lines.append(f"secrets in {location}: {len(found)} of {len(self.names)}")
            for place, names in sorted(places.items(), key=lambda item: -len(item[1])):
                lines.append(f"    {place}: {len(names)}: {', '.join(sorted(names))}")
        for where, kinds in sorted(self.canaries.items()):
            if kinds:
                lines.append(f"missing from {where}: {len(kinds)} groups")
                for kind, example in sorted(kinds.items()):
                    lines.append(f"    {kind} ({self.missing[(where, kind)]}x): e.g. {example}")
        return "\n".join(lines)


def database_text() -> Iterable[tuple[str, str]]:
    """(``table.column``, the column's text values joined) for every column of every table."""
    for model in apps.get_models(include_auto_created=True):
        columns = [f.attname for f in model._meta.concrete_fields]
        values: dict[str, list[str]] = defaultdict(list)
        for row in model.objects.all().values_list(*columns):
            for column, value in zip(columns, row, strict=True):
                if isinstance(value, (dict, list)):
                    value = json.dumps(value, ensure_ascii=False)
                elif isinstance(value, bytes | memoryview):
                    value = bytes(value).decode("utf-8", errors="replace")
                if isinstance(value, str) and value:
                    values[column].append(value)
        for column, texts in values.items():
            yield f"{model._meta.db_table}.{column}", "\n".join(texts)


def raw_database(findings: Findings) -> str:
    """Scan the database's bytes (SQLite image, file and WAL; or pg_dump). Returns what was scanned."""
    if connection.vendor == "sqlite":
        settings_dict = connection.settings_dict
        raw = connection.connection  # the sqlite3 connection: its image holds free pages too
        findings.scan_bytes("raw database bytes", "sqlite image", raw.serialize())
        name = str(settings_dict["NAME"])
        scanned = "the SQLite image (an in-memory test database has no -wal file)"
        if "memory" not in name and Path(name).exists():
            for suffix in ("", "-wal"):
                path = Path(name + suffix)
                if path.exists():
                    findings.scan_bytes("raw database bytes", str(path), path.read_bytes())
            scanned = f"the SQLite image, {name} and its -wal"
        return scanned
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        pytest.skip("pg_dump is not installed: the PostgreSQL dump cannot be searched")
    settings_dict = connection.settings_dict
    command = [pg_dump, "-h", settings_dict["HOST"] or "127.0.0.1", "-U", settings_dict["USER"] or "postgres"]
    if settings_dict.get("PORT"):
        command += ["-p", str(settings_dict["PORT"])]
    dump = subprocess.run([*command, settings_dict["NAME"]], capture_output=True, check=True, timeout=120).stdout
    findings.scan_bytes("pg_dump", f"pg_dump {settings_dict['NAME']}", dump)
    return f"pg_dump of {settings_dict['NAME']} ({len(dump)} bytes)"


# --- the test --------------------------------------------------------------------------------------


def sender(label: str, spec: SourceSpec) -> tuple[Integration, str]:
    """The source's integration and a key bound to all tenants."""
    if spec.mapping:
        mapping = json.loads((DATA / "custom" / spec.mapping / "mapping.json").read_text())
        integration, issued = integration_custom_create_with_key(
            name=f"corpus-{spec.mapping}", mapping=mapping, all_tenants=True, label="corpus"
        )
        return integration, issued.key
    integration = integration_get_or_create(source=spec.source, name=f"corpus-{spec.source}")
    return integration, integration_key_create(integration=integration, all_tenants=True).key


def test_corpus_entries_match_their_detectors() -> None:
    """Each corpus secret matches the detect-secrets plugin it names (so it is a fair test of the detector)."""
    plugins = pytest.importorskip("detect_secrets.core.plugins.util")
    classes = plugins.get_mapping_from_secret_type_to_class()
    by_name = {cls.__name__: cls for cls in classes.values()}
    assert len(CORPUS) >= 30 and len({e["name"] for e in CORPUS}) == len(CORPUS)
    missed = []
    for entry in CORPUS:
        if entry["detector"] is None:
            continue
        plugin = by_name[entry["detector"]]()
        line = entry["text"].replace("\n", " ")
        # the keyword plugin reads configuration-like files; YAML is its widest
        found = list(plugin.analyze_line(filename="alert.yaml", line=line, line_number=1))
        if not found:
            missed.append(entry["name"])
    assert not missed, f"corpus entries their detector does not match: {missed}"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_no_secret_is_stored_or_shown_and_every_canary_is(
    story_tenants: dict[str, Tenant], caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    settings.HANDOVER_MAX_BODY_BYTES = MAX_BODY
    started = time.monotonic()
    findings = Findings(names={entry["name"]: secret_forms(entry["secret"]) for entry in CORPUS})
    support = UserFactory(username="corpus-support")
    admin = UserFactory(username="corpus-admin", admin=True)
    for tenant in story_tenants.values():
        role_grant(user=support, role="support", obj=tenant)
    staff = admin_client(admin)
    senders = {label: sender(label, spec) for label, spec in SPECS.items()}
    for label, (_, key) in senders.items():  # the integration keys themselves are secrets too
        findings.names[f"integration key ({label})"] = {key}

    posts: list[Post] = []
    client = Client(raise_request_exception=False)
    for label, spec in SPECS.items():
        integration, key = senders[label]
        for post in posts_for(label, spec, key):
            before = Delivery.objects.order_by("-id").values_list("id", flat=True).first() or 0
            with time_machine.travel(RECEIVED, tick=True):
                response = client.post(
                    f"/api/v1/alerts/{spec.source}/",
                    data=post.body,
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {key}",
                )
            post.status = response.status_code
            post.delivery = Delivery.objects.filter(id__gt=before, integration=integration).first()
            posts.append(post)
            findings.scan("API answers", f"POST {label} {post.secret} -> {post.status}", response.content.decode())
    posted = time.monotonic() - started

    statuses: dict[str, int] = defaultdict(int)
    for post in posts:
        statuses[f"{post.status}{' (oversized)' if post.oversized else ''}"] += 1
        if post.oversized and post.status != 413:
            findings.lost("the 413 path", f"answered {post.status}", post.label)
        elif not post.oversized and post.status >= 500:
            findings.lost("answers", f"{post.label}: {post.status}", post.secret)
        if post.delivery is None:
            findings.lost("deliveries", f"{post.label}: nothing stored", post.secret)

    # 2. the pages a support person sees, the API, the handover export; as support
    people = Client(raise_request_exception=False)
    people.force_login(support)

    def fetch(location: str, path: str, as_client: Client = people) -> str:
        page = as_client.get(path)
        text = page.content.decode(errors="replace")
        if page.status_code >= 500:
            findings.lost(location, f"answered {page.status_code}", path)
        findings.scan(location, path, text)
        return text

    visible: dict[str, int] = defaultdict(int)  # canary kind -> how many a support person sees
    admin_pages = admin_client(admin)
    for post in posts:
        if post.delivery is None:
            continue
        seen = ""
        alerts = list(Alert.objects.filter(delivery=post.delivery).order_by("index"))
        for alert in alerts:
            seen += fetch("alert pages", reverse("runs:alert-detail", kwargs={"id": alert.public_id}))
            seen += fetch("API answers", f"/api/v1/alerts/{alert.public_id}/")
        for mark, kind in post.canaries.items():
            visible[kind] += mark in seen
        if any(mark not in seen for mark in post.canaries):
            # what a support person is not shown, the staff's pages must show (the stored body)
            for alert in alerts[:1]:
                path = reverse("runs:alert-detail", kwargs={"id": alert.public_id})
                seen += fetch("alert pages (staff)", path, admin_pages)
            if post.oversized or not alerts:
                seen += fetch("admin change pages", f"/admin/runs/delivery/{post.delivery.pk}/change/", staff)
        for mark, kind in post.canaries.items():
            if mark not in seen:
                findings.lost(
                    "the alert's page (support or staff) or the delivery's admin page",
                    f"{post.label}/{kind}",
                    f"{post.secret}: {mark} (answered {post.status})",
                )
    fetch("pages", reverse("runs:alert-inbox"))
    page = 1
    while True:
        listing = people.get("/api/v1/alerts/", {"page": page, "page_size": 200})
        findings.scan("API answers", f"/api/v1/alerts/?page={page}", listing.content.decode(errors="replace"))
        if listing.status_code != 200 or not listing.json().get("next"):
            break
        page += 1
    for run in Run.objects.all():
        fetch("pages", reverse("runs:run-detail", kwargs={"id": run.public_id}))
        fetch("API answers", f"/api/v1/runs/{run.public_id}/")
        try:
            handover = handover_create(actor=admin, runs=[run])
        except DomainError:
            continue
        fetch("handover export", reverse("handover:handover-markdown", kwargs={"id": handover.public_id}))
        fetch("pages", reverse("handover:handover-detail", kwargs={"id": handover.public_id}))

    # 3. the admin's change pages of what the alerts wrote (every run; every tenth of the rest)
    for model, every in ((Run, 1), (Attempt, 10), (TimelineEvent, 10), (Delivery, 10), (Alert, 10)):
        for pk in model.objects.order_by("pk").values_list("pk", flat=True)[::every]:
            fetch("admin change pages", f"/admin/runs/{model._meta.model_name}/{pk}/change/", staff)

    # 4. the database (every text column of every table), its raw bytes, and the logs
    db_text: list[str] = []
    for where, text in database_text():
        db_text.append(text)
        findings.scan("database rows", where, text)
    everything = "\n".join(db_text)
    for post in posts:
        for mark, kind in post.canaries.items():
            if mark not in everything:
                findings.lost("database rows", f"{post.label}/{kind}", f"{post.secret}: {mark}")
    scanned = raw_database(findings)
    findings.scan("logs", "caplog (all loggers, DEBUG)", caplog.text)

    total = time.monotonic() - started
    line = (
        f"secrets corpus: {len(CORPUS)} secrets x {len(SPECS)} sources, {len(posts)} posts "
        f"({dict(sorted(statuses.items()))}), looked at {dict(findings.looked)}; raw: {scanned}; "
        f"posting {posted:.0f} s, total {total:.0f} s; canaries a support person sees, by kind: {dict(visible)}; "
        f"attempts {Attempt.objects.count()}, runs {Run.objects.count()}, events {TimelineEvent.objects.count()}"
    )
    print(line)
    report = findings.report()
    print(report)
    assert not report, line + "\n" + report


def admin_client(admin: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    return client
