"""Generated run histories for the recurrence tests and ``bench/recurrence.py``: runs over a span of days across
jobs and tenants, with failed attempts, missed runs, recoveries, handovers and replay requests, bulk-created.

``history_plan`` draws the history as plain data (``RunPlan``); ``history_create`` writes it with
``bulk_create``; ``expected_figures`` computes the recurrence figures straight from the plan, in
Python, following docs/recurrence.md — the oracle the selectors are checked against.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from approvals.replays.models import ReplayRequest
from handover.handovers.models import Handover, HandoverRun
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, Tenant

CLASSES = ("", "partially_committed", "never_started", "completed_ack_lost")


@dataclass
class RunPlan:
    """One run of the history (times UTC)."""

    job: int
    tenant: int
    scheduled_for: datetime
    kind: str  # "ok", "failed" or "missed"
    failed_ends: list[datetime] = field(default_factory=list)
    recovered_at: datetime | None = None
    failure_class: str = ""
    possible_duplicates: int = 0
    duplicate_triggers: int = 0
    handover: tuple[datetime, bool] | None = None  # (handed over at, needed the technical owner)
    replays: list[datetime | None] = field(default_factory=list)  # approved at, None while pending
    run_id: int | None = None

    @property
    def failed(self) -> bool:
        return self.kind != "ok"

    @property
    def failed_at(self) -> datetime:
        return min(self.failed_ends) if self.failed_ends else self.scheduled_for + timedelta(minutes=30)

    @property
    def failures(self) -> int:
        return max(len(self.failed_ends), 1)


def history_plan(*, runs: int, days: int, end: datetime, jobs: int, tenants: int, seed: int = 7) -> list[RunPlan]:
    """``runs`` runs spread evenly over the ``days`` before ``end``, every one on its own instant."""
    rng = random.Random(seed)
    span = days * 86400
    step = span / runs
    plans = []
    for index in range(runs):
        at = end - timedelta(seconds=span) + timedelta(seconds=int(index * step + rng.random() * step * 0.5))
        plan = RunPlan(job=rng.randrange(jobs), tenant=rng.randrange(tenants), scheduled_for=at, kind="ok")
        roll = rng.random()
        if roll < 0.3:
            plan.kind = "failed"
            plan.failed_ends = [
                at + timedelta(minutes=5 + 17 * n + rng.randrange(10)) for n in range(rng.randint(1, 3))
            ]
            plan.failure_class = rng.choice(CLASSES)
            plan.possible_duplicates = rng.choice([0, 0, 0, 2])
            plan.duplicate_triggers = rng.choice([0, 0, 1])
            if rng.random() < 0.6:
                plan.handover = (plan.failed_at + timedelta(minutes=rng.randrange(20, 600)), rng.random() < 0.3)
            for _ in range(rng.choice([0, 0, 1, 2])):
                plan.replays.append(
                    plan.failed_at + timedelta(minutes=rng.randrange(60, 3000)) if rng.random() < 0.7 else None
                )
            if rng.random() < 0.6:
                plan.recovered_at = max(plan.failed_ends) + timedelta(minutes=rng.randrange(30, 5000))
        elif roll < 0.36:
            plan.kind = "missed"
        plans.append(plan)
    return plans


def history_create(
    *, plans: Sequence[RunPlan], jobs: Sequence[Job], tenants: Sequence[Tenant], person: AbstractBaseUser
) -> None:
    """Write ``plans`` with ``bulk_create`` (runs, attempts, handovers and their links, replay requests);
    sets each plan's ``run_id``. Bypasses the services on purpose: a history of 100k runs in seconds."""
    run_rows = []
    for plan in plans:
        if plan.kind == "ok":
            status, changed = Run.Status.SUCCEEDED, plan.scheduled_for + timedelta(minutes=20)
        elif plan.kind == "missed":
            status, changed = Run.Status.MISSED, plan.failed_at
        elif plan.recovered_at is not None:
            status, changed = Run.Status.SUCCEEDED, plan.recovered_at
        else:
            status, changed = Run.Status.FAILED, max(plan.failed_ends)
        run_rows.append(
            Run(
                job=jobs[plan.job],
                tenant=tenants[plan.tenant],
                environment="prod",
                window_start=plan.scheduled_for - timedelta(hours=1),
                window_end=plan.scheduled_for,
                scheduled_for=plan.scheduled_for,
                status=status,
                status_changed_at=changed,
                failure_class_suggested=plan.failure_class,
                possible_duplicate_count=plan.possible_duplicates,
            )
        )
    created = Run.objects.bulk_create(run_rows, batch_size=2000)
    if any(r.pk is None for r in created):  # backends that return no ids: read them back by identity
        ids = dict(Run.objects.values_list("scheduled_for", "pk"))
        for row in created:
            row.pk = ids[row.scheduled_for]
    attempts: list[Attempt] = []
    handovers: list[tuple[Handover, Run]] = []
    replays: list[ReplayRequest] = []
    now = datetime.now(UTC)
    for plan, run in zip(plans, created, strict=True):
        plan.run_id = run.pk
        number = 0

        def attempt(status: str, ended: datetime, run: Run = run, **extra: Any) -> None:
            nonlocal number
            number += 1
            attempts.append(
                Attempt(
                    run=run,
                    execution_id=f"x-{run.pk}-{number}",
                    number=number,
                    status=status,
                    started_at=ended - timedelta(minutes=4),
                    ended_at=ended,
                    status_changed_at=ended,
                    **extra,
                )
            )

        for ended in plan.failed_ends:
            attempt(Attempt.Status.FAILED, ended)
        if plan.kind == "ok":
            attempt(Attempt.Status.SUCCEEDED, plan.scheduled_for + timedelta(minutes=20))
        if plan.recovered_at is not None:
            attempt(Attempt.Status.SUCCEEDED, plan.recovered_at, trigger=Attempt.Trigger.MANUAL_REPLAY)
        for _ in range(plan.duplicate_triggers):
            attempt(Attempt.Status.SUCCEEDED, plan.scheduled_for + timedelta(minutes=2), is_duplicate_trigger=True)
        if plan.handover is not None:
            handed_over_at, explained = plan.handover
            handovers.append(
                (
                    Handover(
                        job=run.job,
                        title=f"run {run.pk}",
                        status=Handover.Status.HANDED_OVER,
                        handed_over_at=handed_over_at,
                        handed_over_by=person,
                        created_by=person,
                        is_supportability_defect=explained,
                    ),
                    run,
                )
            )
        for approved_at in plan.replays:
            replays.append(
                ReplayRequest(
                    run=run,
                    kind=ReplayRequest.Kind.ABSENT_ITEMS,
                    reason="history",
                    requested_by=person,
                    status=ReplayRequest.Status.APPROVED if approved_at else ReplayRequest.Status.PENDING,
                    approved_at=approved_at,
                    scope_fingerprint="0" * 64,
                    expires_at=now + timedelta(days=1),
                )
            )
    Attempt.objects.bulk_create(attempts, batch_size=2000)
    made = Handover.objects.bulk_create([h for h, _ in handovers], batch_size=2000)
    if any(h.pk is None for h in made):
        by_title = dict(Handover.objects.values_list("title", "pk"))
        for handover in made:
            handover.pk = by_title[handover.title]
    HandoverRun.objects.bulk_create(
        [
            HandoverRun(handover=h, run=run, is_open=True, created_at=h.handed_over_at)
            for h, (_, run) in zip(made, handovers, strict=True)
        ],
        batch_size=2000,
    )
    ReplayRequest.objects.bulk_create(replays, batch_size=2000)


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1]


def expected_figures(
    plans: Sequence[RunPlan], *, since: datetime, until: datetime, key: Callable[[RunPlan], Any]
) -> dict[Any, dict[str, Any]]:
    """The recurrence figures of the failed runs in ``[since, until)``, grouped by ``key(plan)``, computed
    from the plan alone (docs/recurrence.md "Figures")."""
    groups: dict[Any, list[RunPlan]] = defaultdict(list)
    for plan in plans:
        if plan.failed and since <= plan.scheduled_for < until:
            groups[key(plan)].append(plan)
    period = (until - since).total_seconds()
    out = {}
    for name, runs in groups.items():
        handed = [(p.handover[0] - p.failed_at).total_seconds() for p in runs if p.handover]
        approved = [(min(a for a in p.replays if a) - p.failed_at).total_seconds() for p in runs if any(p.replays)]
        recovered = [(p.recovered_at - p.failed_at).total_seconds() for p in runs if p.recovered_at]
        days_open = sum(min(((p.recovered_at or until) - p.failed_at).total_seconds(), period) for p in runs) / 86400
        figures = {
            "failures": sum(p.failures for p in runs),
            "runs_affected": len(runs),
            "handovers": sum(1 for p in runs if p.handover),
            "owner_explained": sum(1 for p in runs if p.handover and p.handover[1]),
            "replays": sum(len(p.replays) for p in runs),
            "duplicates": sum(p.possible_duplicates + p.duplicate_triggers for p in runs),
            "days_open": round(days_open, 2),
            "to_handover_median": _percentile(handed, 0.5),
            "to_handover_p90": _percentile(handed, 0.9),
            "to_approved_replay_median": _percentile(approved, 0.5),
            "to_approved_replay_p90": _percentile(approved, 0.9),
            "to_recovery_median": _percentile(recovered, 0.5),
            "to_recovery_p90": _percentile(recovered, 0.9),
            "unrecovered": sum(1 for p in runs if p.recovered_at is None),
        }
        figures["score"] = round(
            figures["failures"]
            + 3 * figures["handovers"]
            + 2 * figures["replays"]
            + figures["days_open"]
            + 5 * figures["owner_explained"],
            2,
        )
        out[name] = figures
    return out
