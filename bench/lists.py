#!/usr/bin/env python
"""List-page benchmark: the runs list and the alert inbox over a long history, old query shape vs new.

Usage (from the repository root; never run in CI)::

    .venv/bin/python bench/lists.py                      # 50,000 runs (~100,000 attempts), 50,000 alerts
    .venv/bin/python bench/lists.py --runs 10000 --alerts 10000 --repeat 10
    .venv/bin/python bench/lists.py --keep               # keep the database afterwards

What it does, all on 127.0.0.1 (it refuses any other host):

1. (re)creates the database ``handover_perf`` (``--database-name``) on the PostgreSQL server of
   ``--database-url`` and migrates it;
2. bulk-inserts 20 tenants, 10 jobs, ``--runs`` runs (one hourly window each) with 1-3 attempts,
   and ``--alerts`` alerts over 5,000 deliveries: 1 % unmatched, 0.2 % pending, 15 % duplicates of
   an earlier alert, 3 % rejected, 2 % ignored, the rest accepted (linked to a run); a superuser and
   a support person on 5 of the tenants; then ``VACUUM ANALYZE`` (what autovacuum does soon after);
3. for both people, times the old and the new shape of each selector the way the pages use it
   (``Paginator(…, 50)``: count, then the page), in this process, alternating old and new:
   median wall time over ``--repeat`` runs, the queries, and the sum of the queries' server-side
   ``EXPLAIN ANALYZE`` execution times; it checks that both shapes give the same rows and counts;
4. times the whole pages (``/runs/``, ``/api/v1/runs/``, ``/inbox/``) through Django's test client
   with the views calling the old selectors (patched in) and then the new ones.

The old shapes are copied below (``old_run_list``, ``old_alert_inbox``): ``Count("attempts")`` on the
runs list, and a CASE sort of every visible alert plus two full counts on the inbox. The last line is::

    lists runs=N alerts=M run_list_old_ms=… run_list_new_ms=… inbox_old_ms=… inbox_new_ms=… (admin, page 1)
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
BASE = datetime(2020, 1, 1, tzinfo=UTC)
TENANTS = 20
JOBS = 10
DELIVERIES = 5_000
PAGE_SIZE = 50


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# the old shapes, as they were before this change (runs/attempts/selectors.py, runs/alerts/selectors.py)


def old_run_list(
    *,
    user: Any,
    job: str | None = None,
    tenant: str | None = None,
    environment: str | None = None,
    status: str | None = None,
    window_from: object | None = None,
    window_to: object | None = None,
    search: str | None = None,
) -> Any:
    from django.db.models import Count, Q

    from runs.attempts.models import Attempt, Run
    from runs.permissions import run_visibility_filter

    runs = Run.objects.filter(run_visibility_filter(user=user))
    if job:
        runs = runs.filter(job__key=job)
    if tenant:
        runs = runs.filter(tenant__slug_key=tenant.casefold())
    if environment:
        runs = runs.filter(environment=environment)
    if status:
        runs = runs.filter(status=status)
    if window_from:
        runs = runs.filter(window_start__gte=window_from)
    if window_to:
        runs = runs.filter(window_start__lt=window_to)
    if search:
        matching = Attempt.objects.filter(Q(execution_id__icontains=search) | Q(correlation_ref__icontains=search))
        runs = runs.filter(pk__in=matching.values("run_id"))
    return (
        runs.select_related("job", "tenant", "target")
        .annotate(attempt_count=Count("attempts", distinct=True))
        .order_by("-window_start", "-id")
    )


def old_alert_inbox(*, user: Any) -> tuple[Any, dict[str, int]]:
    from django.db.models import Case, Count, IntegerField, Value, When

    from runs.alerts.models import Alert
    from runs.alerts.selectors import alert_list

    alerts = alert_list(user=user)
    counts = {row["outcome"]: row["n"] for row in alerts.order_by().values("outcome").annotate(n=Count("id"))}
    needs_person = Case(
        When(outcome=Alert.Outcome.UNMATCHED, then=Value(0)),
        When(outcome=Alert.Outcome.PENDING, then=Value(1)),
        default=Value(2),
        output_field=IntegerField(),
    )
    originals = alerts.filter(duplicate_of__isnull=True).order_by(needs_person, "-created_at", "-id")
    return originals, counts


# ---------------------------------------------------------------------------------------------
# database


class PerfDatabase:
    """The benchmark's own database on a local PostgreSQL server, dropped first if it is left over."""

    def __init__(self, server_url: str, name: str) -> None:
        parts = urlsplit(server_url)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"refusing to use a non-local database server: {parts.hostname}")
        if not name.startswith("handover_perf"):
            raise SystemExit("the database name must start with handover_perf")
        self.server_url = server_url
        self.name = name
        self.url = urlunsplit(parts._replace(path=f"/{name}"))

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.server_url, autocommit=True)

    def create(self) -> None:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.name}"')
        log(f"created database {self.name}")

    def drop(self) -> None:
        from django.db import connections

        connections.close_all()
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        log(f"dropped database {self.name}")


def setup_django(db_url: str) -> None:
    os.environ.update(
        {
            "DATABASE_URL": db_url,
            "DJANGO_SETTINGS_MODULE": "handover.settings",
            "DJANGO_DEBUG": "false",
            "HANDOVER_PRODUCTION": "false",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "HANDOVER_VAR_DIR": tempfile.mkdtemp(prefix="handover-perf-"),
            "HANDOVER_LOG_LEVEL": "WARNING",
            "CACHE_URL": "locmemcache://",
            "CELERY_BROKER_URL": "memory://",
        }
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["testserver", "localhost"]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # the old shapes count exactly: lift the list-count cap so both give the same counts (the capped
    # counts are measured by bench/history.py)
    settings.LIST_COUNT_CAP = 10**12
    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    log(f"migrated in {time.monotonic() - started:.1f} s")


def build_world(runs: int, alerts: int) -> tuple[Any, Any]:
    """Insert tenants, jobs, runs with attempts, deliveries and alerts; return ``(admin, support)``."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from runs.alerts.models import Alert, Delivery
    from runs.attempts.models import Attempt, Run
    from runs.catalog.models import Integration, IntegrationKey
    from runs.catalog.services import job_get_or_create, role_grant, tenant_get_or_create

    started = time.monotonic()
    tenants = [tenant_get_or_create(slug=f"perf-tenant-{n:02d}")[0] for n in range(TENANTS)]
    jobs = [
        job_get_or_create(
            key=f"perf-job-{n}",
            defaults={"schedule": "0 * * * *", "timezone": "UTC", "window_alignment": "hour"},
        )[0]
        for n in range(JOBS)
    ]
    batch = 5_000
    run_ids: list[int] = []
    for first in range(0, runs, batch):
        rows = []
        for i in range(first, min(first + batch, runs)):
            start = BASE + timedelta(hours=i)
            rows.append(
                Run(
                    job=jobs[i % JOBS],
                    tenant=tenants[(i // JOBS) % TENANTS],
                    environment="prod",
                    window_start=start,
                    window_end=start + timedelta(hours=1),
                    scheduled_for=start + timedelta(hours=1, minutes=5),
                    status=Run.Status.FAILED if i % 7 == 0 else Run.Status.SUCCEEDED,
                    created_at=start + timedelta(hours=1, minutes=5),
                )
            )
        run_ids.extend(r.pk for r in Run.objects.bulk_create(rows))
        attempts = []
        for offset, run in enumerate(rows):
            i = first + offset
            for number in range(1, 1 + (i % 3) + 1):  # 1, 2 or 3 attempts
                attempts.append(
                    Attempt(
                        run=run,
                        execution_id=f"perf-{i}-{number}",
                        number=number,
                        status=Attempt.Status.SUCCEEDED if number == (i % 3) + 1 else Attempt.Status.FAILED,
                        started_at=run.scheduled_for,
                    )
                )
        Attempt.objects.bulk_create(attempts, batch_size=batch)
    log(f"inserted {runs:,} runs with {Attempt.objects.count():,} attempts in {time.monotonic() - started:.1f} s")

    started = time.monotonic()
    integration = Integration.objects.create(source="generic", name="perf-generic")
    key = IntegrationKey.objects.create(
        integration=integration, prefix="hk_perf", secret_hash="0" * 64, all_tenants=True
    )
    per_delivery = max(1, -(-alerts // DELIVERIES))
    body = json.dumps({"alerts": [{"job": "perf-job-0", "tenant": "perf-tenant-00"}] * per_delivery})
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(
                integration=integration,
                key=key,
                received_at=BASE + timedelta(minutes=10 * d),
                size_bytes=len(body),
                sha256="0" * 64,
                body=body,
                outcome=Delivery.Outcome.PROCESSED,
                created_at=BASE + timedelta(minutes=10 * d),
            )
            for d in range(-(-alerts // per_delivery))
        ],
        batch_size=batch,
    )
    first_attempts = dict(Attempt.objects.filter(number=1).values_list("run_id", "id"))
    span_minutes = max(runs * 60 // max(alerts, 1), 1)
    originals: list[Alert] = []
    for first in range(0, alerts, batch):
        rows = []
        duplicates_of: list[Alert | None] = []
        for i in range(first, min(first + batch, alerts)):
            bucket = i % 1000
            if bucket < 10:
                outcome = Alert.Outcome.UNMATCHED
            elif bucket < 12:
                outcome = Alert.Outcome.PENDING
            elif bucket < 162 and originals:
                outcome = Alert.Outcome.DUPLICATE
            elif bucket < 192:
                outcome = Alert.Outcome.REJECTED
            elif bucket < 212:
                outcome = Alert.Outcome.IGNORED
            else:
                outcome = Alert.Outcome.ACCEPTED
            run_index = (i * runs) // max(alerts, 1)
            linked = outcome in (Alert.Outcome.ACCEPTED, Alert.Outcome.DUPLICATE)
            original = originals[-1 - (i % min(len(originals), 50))] if outcome == Alert.Outcome.DUPLICATE else None
            duplicates_of.append(original)
            run_id = run_ids[run_index] if linked else None
            rows.append(
                Alert(
                    delivery=deliveries[i // per_delivery],
                    integration=integration,
                    index=i % per_delivery,
                    source="generic",
                    dedup_key=f"perf-{i}",
                    dedup_hash=f"{i:064x}" if original is None else "",
                    duplicate_of=original,
                    outcome=outcome,
                    reason="" if outcome == Alert.Outcome.ACCEPTED else f"perf {outcome}",
                    job_key=f"perf-job-{run_index % JOBS}" if outcome != Alert.Outcome.UNMATCHED else "not-registered",
                    tenant_slug=f"perf-tenant-{(run_index // JOBS) % TENANTS:02d}",
                    environment="prod",
                    execution_id=f"perf-{run_index}-1",
                    run_id=run_id,
                    attempt_id=first_attempts.get(run_id) if run_id else None,
                    created_at=BASE + timedelta(minutes=span_minutes * i),
                )
            )
        created = Alert.objects.bulk_create(rows)
        originals.extend(a for a, o in zip(created, duplicates_of, strict=True) if o is None)
    log(f"inserted {alerts:,} alerts in {time.monotonic() - started:.1f} s")

    user_model = get_user_model()
    admin = user_model.objects.create_superuser(username="perf-admin", password=secrets.token_urlsafe(16))
    support = user_model.objects.create_user(username="perf-support", password=secrets.token_urlsafe(16))
    for tenant in tenants[:5]:
        role_grant(user=support, role="support", obj=tenant)
    with connection.cursor() as cursor:
        for table in ("runs_run", "runs_attempt", "runs_alert", "runs_delivery"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    return admin, support


# ---------------------------------------------------------------------------------------------
# measuring


def page_of(queryset_or_list: Any, number: int) -> tuple[int, list[Any]]:
    """What the pages do: ``Paginator(…, 50)``, the count, then the rows of page ``number``."""
    from django.core.paginator import Paginator

    page = Paginator(queryset_or_list, PAGE_SIZE).get_page(number)
    return page.paginator.count, list(page.object_list)


def measure(fetch: Callable[[], Any], repeat: int) -> tuple[float, int, float]:
    """Median wall ms of ``fetch()`` after a warm-up, its query count, and the sum of its queries'
    server-side execution times (``EXPLAIN ANALYZE``, ms)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fetch()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fetch()
        samples.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as captured:
        fetch()
    server_ms = 0.0
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query["sql"])
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            server_ms += plan[0]["Execution Time"]
    return statistics.median(samples), len(captured.captured_queries), server_ms


def compare(label: str, old: Callable[[], Any], new: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Check ``old()`` and ``new()`` give the same result, time both, print one line; return the medians."""
    if old() != new():
        raise SystemExit(f"{label}: the new shape gives other rows or counts than the old one")
    old_ms, old_q, old_sql = measure(old, repeat)
    new_ms, new_q, new_sql = measure(new, repeat)
    print(
        f"  {label:<34} old {old_ms:7.1f} ms ({old_q} q, SQL {old_sql:6.1f} ms)   "
        f"new {new_ms:7.1f} ms ({new_q} q, SQL {new_sql:6.1f} ms)   ratio {old_ms / new_ms:5.1f}x",
        flush=True,
    )
    return old_ms, new_ms


def page_timings(admin: Any, support: Any, repeat: int) -> None:
    """Whole pages through the test client, the views calling the old selectors, then the new."""
    from django.test import Client

    import runs.alerts.views
    import runs.attempts.api
    import runs.attempts.views
    from runs.alerts.selectors import alert_inbox
    from runs.attempts.selectors import run_list

    def swap(shape: str) -> None:
        old = shape == "old"
        runs.attempts.views.run_list = old_run_list if old else run_list  # type: ignore[assignment]
        runs.attempts.api.run_list = old_run_list if old else run_list  # type: ignore[assignment]
        runs.alerts.views.alert_inbox = old_alert_inbox if old else alert_inbox  # type: ignore[assignment]

    for who, user in (("admin", admin), ("support", support)):
        client = Client()
        client.force_login(user)
        for url in ("/runs/", "/api/v1/runs/", "/inbox/", "/inbox/?page=20"):
            medians = {}
            for shape in ("old", "new"):
                swap(shape)

                def get(url: str = url, client: Any = client) -> Any:
                    response = client.get(url)
                    if response.status_code != 200:
                        raise SystemExit(f"GET {url} answered {response.status_code}")
                    return response

                get()
                samples = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    get()
                    samples.append((time.perf_counter() - started) * 1000)
                medians[shape] = statistics.median(samples)
            print(
                f"  GET {url:<18} as {who:<8} old {medians['old']:7.1f} ms   new {medians['new']:7.1f} ms   "
                f"ratio {medians['old'] / medians['new']:5.1f}x",
                flush=True,
            )
    swap("new")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50_000, help="runs (default 50,000; 1-3 attempts each)")
    parser.add_argument("--alerts", type=int, default=50_000, help="alerts (default 50,000)")
    parser.add_argument("--repeat", type=int, default=20, help="timed repetitions of each measurement (median)")
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL, help="PostgreSQL server (127.0.0.1 only)")
    parser.add_argument("--database-name", default="handover_perf", help="the database to (re)create")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    if args.runs < 1000 or args.alerts < 1000:
        parser.error("--runs and --alerts must be at least 1,000")

    db = PerfDatabase(args.database_url, args.database_name)
    db.create()
    try:
        setup_django(db.url)
        from runs.alerts.selectors import alert_inbox
        from runs.attempts.selectors import run_list

        admin, support = build_world(args.runs, args.alerts)

        def runs_page(selector: Callable[..., Any], user: Any, number: int = 1, **filters: Any) -> Callable[[], Any]:
            def fetch() -> Any:
                count, rows = page_of(selector(user=user, **filters), number)
                return count, [(r.pk, r.attempt_count, r.job.key, r.tenant.slug) for r in rows]

            return fetch

        def inbox_page(selector: Callable[..., Any], user: Any, number: int = 1) -> Callable[[], Any]:
            def fetch() -> Any:
                alerts, counts = selector(user=user)
                count, rows = page_of(alerts, number)
                return (
                    counts,
                    count,
                    [(a.pk, a.outcome, a.delivery.notes, a.run_id and a.run.public_id) for a in rows],
                )

            return fetch

        # the page just past the unmatched and pending alerts, and one deep in the rest
        boundary = args.alerts * 12 // 1000 // PAGE_SIZE + 1
        results = {}
        print(f"lists: {args.runs:,} runs, {args.alerts:,} alerts, median of {args.repeat}")
        for who, user in (("admin", admin), ("support", support)):
            results[("runs", who)] = compare(
                f"run list page 1 ({who})", runs_page(old_run_list, user), runs_page(run_list, user), args.repeat
            )
            compare(
                f"run list page 20 ({who})",
                runs_page(old_run_list, user, 20),
                runs_page(run_list, user, 20),
                args.repeat,
            )
            compare(
                f"run list ?status=failed ({who})",
                runs_page(old_run_list, user, status="failed"),
                runs_page(run_list, user, status="failed"),
                args.repeat,
            )
            results[("inbox", who)] = compare(
                f"inbox page 1 ({who})", inbox_page(old_alert_inbox, user), inbox_page(alert_inbox, user), args.repeat
            )
            compare(
                f"inbox page {boundary} ({who})",
                inbox_page(old_alert_inbox, user, boundary),
                inbox_page(alert_inbox, user, boundary),
                args.repeat,
            )
            compare(
                f"inbox page 100 ({who})",
                inbox_page(old_alert_inbox, user, 100),
                inbox_page(alert_inbox, user, 100),
                args.repeat,
            )
        print("whole pages (test client: session, middleware, template):")
        page_timings(admin, support, max(args.repeat // 2, 5))
        run_old, run_new = results[("runs", "admin")]
        inbox_old, inbox_new = results[("inbox", "admin")]
        print(
            f"lists runs={args.runs} alerts={args.alerts} run_list_old_ms={run_old:.1f} run_list_new_ms={run_new:.1f} "
            f"run_list_ratio={run_old / run_new:.1f} inbox_old_ms={inbox_old:.1f} inbox_new_ms={inbox_new:.1f} "
            f"inbox_ratio={inbox_old / inbox_new:.1f}"
        )
    finally:
        if args.keep:
            log(f"kept database {db.name} ({db.url})")
        else:
            db.drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
