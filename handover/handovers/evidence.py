"""The evidence a handover is pre-filled from: attempts, notable timeline events, ledger totals and items.

One call loads everything for a handover's runs in a fixed number of queries; the pre-fill rules
(``handover.handovers.prefill``) are then pure functions of these dataclasses.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import F, Prefetch, Q, Window
from django.db.models.functions import RowNumber

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, SideEffect
from runs.catalog.selectors import job_repeat_safety
from runs.ledger.models import WorkItem
from runs.timeline.models import TimelineEvent

SAMPLE_SIZE = 10
# Timeline events worth a line under "what definitely happened" (attempt events come from the attempts).
NOTABLE_EVENT_KINDS = (
    TimelineEvent.Kind.MANUAL_REPLAY_UNAPPROVED,
    TimelineEvent.Kind.RETRIES_EXHAUSTED,
    TimelineEvent.Kind.RUN_MISSED,
    TimelineEvent.Kind.MISSED_REPORTED,
    TimelineEvent.Kind.OVERLAP_BREACH,
    TimelineEvent.Kind.OVERLAP_DETECTED,
    TimelineEvent.Kind.SCHEDULE_MISMATCH,
    TimelineEvent.Kind.FAILURE_CLASS_CONFIRMED,
)
ACTIVE_ATTEMPT_STATUSES = (Attempt.Status.QUEUED, Attempt.Status.RUNNING)


@dataclass
class JobEvidence:
    """The job of a handover: its pause, side effects and their least safe repeat safety."""

    job: Job
    side_effects: list[SideEffect]
    repeat_safety: str


@dataclass
class RunEvidence:
    """What is known about one run: attempts (by number, with runner reports), notable events,
    and up to ``SAMPLE_SIZE`` record ids per ledger outcome (``samples["possible_duplicate"]`` for
    possible duplicates). Totals are the run's stored ones."""

    run: Run
    attempts: list[Attempt]
    notable_events: list[TimelineEvent] = field(default_factory=list)
    samples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def has_ledger(self) -> bool:
        return self.run.ledger_updated_at is not None

    @property
    def latest_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def active_attempts(self) -> list[Attempt]:
        return [a for a in self.attempts if a.status in ACTIVE_ATTEMPT_STATUSES]

    @property
    def config_versions(self) -> list[str]:
        seen: list[str] = []
        for attempt in self.attempts:
            if attempt.config_version and attempt.config_version not in seen:
                seen.append(attempt.config_version)
        return seen

    def runner_claims(self) -> tuple[int, int, int]:
        """(attempted, claimed completed, failed) record ids over every runner report of the run."""
        attempted: set[str] = set()
        completed: set[str] = set()
        failed: set[str] = set()
        for attempt in self.attempts:
            for report in attempt.runner_reports.all():
                attempted.update(map(str, report.attempted_ids or []))
                completed.update(map(str, report.completed_ids or []))
                failed.update(map(str, report.failed_ids or []))
        return len(attempted | completed | failed), len(completed), len(failed - completed)


def handover_evidence(*, runs: list[Run]) -> tuple[JobEvidence, list[RunEvidence]]:
    """Load the evidence about ``runs`` (all of one job) for pre-filling a handover.

    Returns the job's evidence and one ``RunEvidence`` per run, in the order given. Queries: seven
    (runs with job, tenant, target and the failure-class confirmer; attempts; runner reports;
    notable events; side effects; ledger samples; possible-duplicate samples).
    """
    ids = [run.pk for run in runs]
    loaded = {
        run.pk: run
        for run in Run.objects.filter(pk__in=ids).select_related(
            "job", "job__paused_by", "tenant", "target", "failure_class_confirmed_by"
        )
    }
    attempts: dict[int, list[Attempt]] = defaultdict(list)
    for attempt in (
        Attempt.objects.filter(run_id__in=ids)
        .prefetch_related(Prefetch("runner_reports"))
        .order_by("number", "created_at", "id")
    ):
        attempts[attempt.run_id].append(attempt)
    events: dict[int, list[TimelineEvent]] = defaultdict(list)
    for event in (
        TimelineEvent.objects.filter(run_id__in=ids, kind__in=NOTABLE_EVENT_KINDS)
        .select_related("actor_user")
        .order_by("occurred_at", "id")
    ):
        events[event.run_id].append(event)  # type: ignore[index]
    samples: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    ranked = (
        # items found in the destination but not eligible count as possible duplicates, not as outcomes
        WorkItem.objects.filter(run_id__in=ids, is_in_population=True)
        .exclude(outcome=WorkItem.Outcome.SKIPPED)
        .annotate(rank=Window(RowNumber(), partition_by=[F("run_id"), F("outcome")], order_by=F("record_id").asc()))
        .filter(rank__lte=SAMPLE_SIZE)
        .order_by("run_id", "outcome", "record_id")
        .values_list("run_id", "outcome", "record_id")
    )
    for run_id, outcome, record_id in ranked:
        samples[run_id][outcome].append(record_id)
    duplicates = (
        WorkItem.objects.filter(Q(run_id__in=ids) & Q(is_possible_duplicate=True))
        .annotate(rank=Window(RowNumber(), partition_by=[F("run_id")], order_by=F("record_id").asc()))
        .filter(rank__lte=SAMPLE_SIZE)
        .order_by("run_id", "record_id")
        .values_list("run_id", "record_id")
    )
    for run_id, record_id in duplicates:
        samples[run_id]["possible_duplicate"].append(record_id)
    first = loaded[ids[0]]
    side_effects = list(SideEffect.objects.filter(job_id=first.job_id).order_by("id"))
    job = JobEvidence(job=first.job, side_effects=side_effects, repeat_safety=job_repeat_safety(side_effects))
    return job, [
        RunEvidence(
            run=loaded[pk],
            attempts=attempts[pk],
            notable_events=events[pk],
            samples={k: list(v) for k, v in samples[pk].items()},
        )
        for pk in ids
    ]
