"""Schedule awareness: next-run checks, their evaluation and sweep, overlap detection and missed runs.

- ``next_run_check_schedule`` creates the check of a target's next fire time (the handover and
  replay issues call it when a handover moves to ``verifying`` or a replay completes).
- ``next_run_check_evaluate`` is the pure rule: it takes the facts about one check and says
  whether it waits, passes, fails or needs a person's confirmation.
- ``next_run_check_sweep`` (Celery beat, every minute) finds due checks and their evidence with
  set-based queries and settles them in short claim transactions; ``next_run_check_transition`` is
  the one function that changes a check's status.
- ``attempt_overlap_record`` is called by the attempt service when an attempt starts running.
- ``run_sweep_missed`` (Celery beat) creates one ``missed`` run per fire time that never reported.

A package split by sub-domain, re-exporting the public names here (``from runs.services.checks import ...``):

- ``schedules``: the schedule in force for a target or job, fire times for a page, DST in words;
- ``events``: times in words and a check's timeline event (shared by the modules below);
- ``scheduling``: who asked for a check, and creating the check of a target's next fire time;
- ``transitions``: the one status writer (guarded bulk UPDATE, events, follow-ups enqueued on commit);
- ``evaluation``: the facts about one check and the pure verdict;
- ``facts``: the facts read set-based (next run, qualifying success, ledger), checks awaiting a person;
- ``sweep``: the due checks found and settled in claim transactions, late successes recorded;
- ``decisions``: a person's waiver and confirmation;
- ``follow_ups``: what a failed check triggers (handover reopen, e-mail) and re-sending lost follow-ups;
- ``overlaps``: an attempt that starts while an earlier run still runs;
- ``missed_runs``: the sweep that creates ``missed`` runs.
"""

from __future__ import annotations

from runs.services.checks.decisions import next_run_check_confirm, next_run_check_waive
from runs.services.checks.evaluation import CheckFacts, CheckVerdict, next_run_check_evaluate
from runs.services.checks.follow_ups import (
    FOLLOW_UP_GRACE,
    FOLLOW_UP_RESEND_WINDOW,
    handover_reopen_for_failed_check,
    next_run_check_follow_ups_resend,
    next_run_check_notify_failed,
)
from runs.services.checks.missed_runs import (
    run_sweep_missed,
)
from runs.services.checks.overlaps import attempt_overlap_record
from runs.services.checks.schedules import (
    FireTime,
    TargetSchedule,
    job_schedule,
    schedule_dst_sentences,
    schedule_fire_times,
    target_schedule,
)
from runs.services.checks.scheduling import CheckRequester, next_run_check_schedule
from runs.services.checks.sweep import SweepResult, next_run_check_sweep
from runs.services.checks.transitions import CheckChange, next_run_check_transition

__all__ = [
    "FOLLOW_UP_GRACE",
    "FOLLOW_UP_RESEND_WINDOW",
    "CheckChange",
    "CheckFacts",
    "CheckRequester",
    "CheckVerdict",
    "FireTime",
    "SweepResult",
    "TargetSchedule",
    "attempt_overlap_record",
    "handover_reopen_for_failed_check",
    "job_schedule",
    "next_run_check_confirm",
    "next_run_check_evaluate",
    "next_run_check_follow_ups_resend",
    "next_run_check_notify_failed",
    "next_run_check_schedule",
    "next_run_check_sweep",
    "next_run_check_transition",
    "next_run_check_waive",
    "run_sweep_missed",
    "schedule_dst_sentences",
    "schedule_fire_times",
    "target_schedule",
]
