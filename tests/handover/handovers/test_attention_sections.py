"""The "needs attention" page's sections read per target and per part (handover.handovers.attention).

They are read without a pass over the whole history (bench/history.py); these tests hold them to the
rule they implement, computed here from every visible run: the last settled runs of each (job,
tenant, environment), with or without a target, the long-unresolved runs from both their parts, and
the poll's fingerprint of the unmatched alerts listed.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from handover.handovers.attention import (
    SETTLED_STATUSES,
    RecentRun,
    attention_state,
    attention_unresolved_runs,
    recent_settled_runs,
)
from handover.handovers.services import handover_create
from runs.alerts.models import Alert
from runs.attempts.models import Run
from runs.catalog.models import Integration
from runs.permissions import run_visibility_filter
from tests.factories import JobTargetFactory, RunFactory, UserFactory
from tests.handover.helpers import World, force_status
from tests.runs.attempts.helpers import make_alerts

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 1, tzinfo=UTC)


def _runs(world: World, statuses: str, *, environment: str = "prod", tenant: Any = None, target: Any = None) -> None:
    """One daily run per letter of ``statuses`` (s succeeded, f failed, m missed, r running, e expected)."""
    words = {"s": "succeeded", "f": "failed", "m": "missed", "r": "running", "e": "expected"}
    for day, letter in enumerate(statuses):
        RunFactory(
            job=world.job,
            tenant=tenant or world.tenant,
            target=target,
            environment=environment,
            status=words[letter],
            window_start=START + timedelta(days=day),
            window_end=START + timedelta(days=day + 1),
        )


def _rule(user: Any, of: int) -> list[RecentRun]:
    """The rule, over every visible run: the newest ``of`` settled runs of each (job, tenant, environment)."""
    kept: dict[tuple[int, int, str], list[RecentRun]] = defaultdict(list)
    runs = (
        Run.objects.filter(run_visibility_filter(user=user), status__in=SETTLED_STATUSES)
        .select_related("job", "tenant")
        .order_by("-window_start", "-id")
    )
    for run in runs:
        group = kept[(run.job_id, run.tenant_id, run.environment)]
        if len(group) < of:
            group.append(
                (
                    run.job_id,
                    run.job.key,
                    run.job.paused_at,
                    run.tenant.slug,
                    run.environment,
                    run.status,
                    run.window_start,
                )
            )
    return sorted(row for rows in kept.values() for row in rows)


def test_the_last_settled_runs_of_every_group_with_or_without_a_target(world: World) -> None:
    _runs(world, "ffsffrffe", target=world.target)  # the world's target: unsettled runs skipped
    _runs(world, "sfffff", environment="staging")  # an environment nobody listed: no target
    JobTargetFactory(job=world.job, tenant=world.tenant, environment="qa", is_active=False)
    _runs(world, "mmm", environment="qa")  # an inactive target's runs are recorded without it
    _runs(world, "ffffff", tenant=world.other_tenant, target=None)  # another tenant's
    admin = UserFactory(admin=True)

    for user in (world.support, world.owner, admin, world.stranger):
        for of in (1, 5, 20):
            assert sorted(recent_settled_runs(user=user, of=of)) == _rule(user, of), (user, of)

    support = recent_settled_runs(user=world.support, of=5)
    assert {row[4] for row in support} == {"prod", "staging", "qa"}
    assert all(row[3] == world.tenant.slug for row in support)  # never the other tenant's
    assert sorted(row[5] for row in support if row[4] == "qa") == ["missed"] * 3
    assert [row[5] for row in support if row[4] == "prod"].count("failed") >= 4
    # the inactive target's group counted once, not once as a target and once as runs without one
    assert len([row for row in support if row[4] == "qa"]) == 3


def test_the_long_unresolved_runs_come_from_both_parts_once_each_oldest_first(world: World) -> None:
    now = timezone.now()
    old = now - timedelta(days=5)

    def run(days: int, **values: Any) -> Run:
        return RunFactory(
            job=world.job,
            tenant=world.tenant,
            target=world.target,
            status="failed",
            window_start=old - timedelta(days=days + 1),
            window_end=old - timedelta(days=days),
            scheduled_for=old - timedelta(days=days),
            **values,
        )

    with_items = run(1, unresolved_count=2)
    with_duplicates = run(2, possible_duplicate_count=1)
    with_both = run(3, unresolved_count=1)
    linked = run(4)
    resolved = run(5)
    recent = RunFactory(
        job=world.job, tenant=world.tenant, target=world.target, status="failed", unresolved_count=1, scheduled_for=now
    )
    theirs = RunFactory(
        job=world.job, tenant=world.other_tenant, status="failed", unresolved_count=1, scheduled_for=old
    )
    handover = handover_create(actor=world.support, runs=[linked, with_both])
    done = handover_create(actor=world.support, runs=[resolved])
    force_status(done, "resolved", world.support)

    found = attention_unresolved_runs(user=world.support, older_than=now - timedelta(days=1))

    assert [r.pk for r in found] == [linked.pk, with_both.pk, with_duplicates.pk, with_items.pk]  # oldest first
    by_pk = {r.pk: r for r in found}
    assert by_pk[linked.pk].open_handover == handover.public_id
    assert by_pk[with_items.pk].open_handover is None
    assert recent.pk not in by_pk and resolved.pk not in by_pk
    assert theirs.pk not in by_pk
    assert [r.pk for r in attention_unresolved_runs(user=world.stranger, older_than=now)] == [theirs.pk]


def test_the_polls_fingerprint_follows_the_unmatched_alerts_the_page_lists(world: World) -> None:
    def integration() -> Integration:  # one per post: each post's alerts are numbered from 0
        return Integration.objects.create(source="generic", name=f"test-generic-{Integration.objects.count()}")

    now = timezone.now()
    listed = make_alerts(integration(), [("unmatched", 0, None, world.tenant.slug)])[0]
    before = attention_state(user=world.support, now=now)

    make_alerts(integration(), [("unmatched", 1, None, world.other_tenant.slug)])  # another tenant's
    assert attention_state(user=world.support, now=now) == before

    make_alerts(integration(), [("unmatched", 2, None, world.tenant.slug)])  # a new one of theirs
    grown = attention_state(user=world.support, now=now)
    assert grown != before

    Alert.objects.filter(pk=listed.pk).update(outcome=Alert.Outcome.ACCEPTED, updated_at=now)  # triaged
    assert attention_state(user=world.support, now=now) not in (before, grown)
