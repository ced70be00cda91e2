"""The invariants the database holds: each written directly through the ORM raises IntegrityError."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from approvals.replays.models import Approval, Dispatch, ReplayRequest, ReplayRequestItem, WebhookDelivery
from tests.approvals.conftest import Approve, MakeRequest, World

pytestmark = pytest.mark.django_db


def raises_integrity(**kwargs: Any) -> Any:
    return pytest.raises(IntegrityError)


def request_row(world: World, **overrides: Any) -> ReplayRequest:
    now = timezone.now()
    values: dict[str, Any] = {
        "run": world.run,
        "kind": "absent_items",
        "reason": "x",
        "requested_by": world.support,
        "scope_fingerprint": "a" * 64,
        "expires_at": now + timedelta(days=1),
        **overrides,
    }
    with transaction.atomic():
        return ReplayRequest.objects.create(**values)


@pytest.mark.parametrize(
    "overrides",
    [
        {"reason": ""},
        {"kind": "everything"},
        {"status": "paused"},
        {"kind": "rejected_fixed", "fix_reference": ""},
        {"status": "approved"},  # without approved_at
        {"status": "dispatched", "approved_at": "now"},  # without dispatched_at
        {"status": "completed", "approved_at": "now", "dispatched_at": "now"},  # without closed_at
        {"status": "pending", "closed_at": "now"},
        {"status": "cancelled", "closed_at": "now"},  # without closed_by and reason
        {"expires_at": "past"},
    ],
)
def test_replay_request_constraints(world: World, overrides: dict[str, Any]) -> None:
    now = timezone.now()
    resolved = {k: (now if v == "now" else now - timedelta(days=1) if v == "past" else v) for k, v in overrides.items()}
    with pytest.raises(IntegrityError):
        request_row(world, **resolved)


def test_one_open_replay_per_work_item(world: World, make_request: MakeRequest) -> None:
    first = make_request(["INV-1"])
    second = request_row(world, scope_fingerprint="b" * 64)
    with pytest.raises(IntegrityError), transaction.atomic():
        ReplayRequestItem.objects.create(
            request=second, work_item=world.items["INV-1"], record_id="INV-1", outcome_at_request="absent"
        )
    ReplayRequestItem.objects.filter(request=first).update(is_open=False)
    ReplayRequestItem.objects.create(
        request=second, work_item=world.items["INV-1"], record_id="INV-1", outcome_at_request="absent"
    )


def approval_row(request: ReplayRequest, **overrides: Any) -> Approval:
    values: dict[str, Any] = {
        "request": request,
        "kind": "business",
        "decision": "approve",
        "actor": overrides.pop("actor", None),
        "requester": request.requested_by,
        "decided_at": timezone.now(),
        "scope_fingerprint": request.scope_fingerprint,
        **overrides,
    }
    with transaction.atomic():
        return Approval.objects.create(**values)


def test_the_requester_cannot_approve_even_written_directly(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    with pytest.raises(IntegrityError):
        approval_row(request, actor=world.support)


def test_one_live_approval_per_kind_and_per_person(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    approval_row(request, actor=world.business)
    with pytest.raises(IntegrityError):
        approval_row(request, actor=world.both)  # a second business approval
    with pytest.raises(IntegrityError):
        approval_row(request, actor=world.business, kind="technical")  # the same person for both
    Approval.objects.update(voided_at=timezone.now(), void_reason="the scope changed")
    approval_row(request, actor=world.business, kind="technical")  # voided ones do not count


@pytest.mark.parametrize(
    "overrides",
    [
        {"kind": "business", "accepts_unknown_repeat_safety": True, "acceptance_reason": "fine"},
        {"kind": "technical", "accepts_unknown_repeat_safety": True, "acceptance_reason": ""},
        {"decision": "reject", "comment": ""},
        {"voided_at": "now", "void_reason": ""},
        {"decision": "maybe"},
    ],
)
def test_approval_constraints(world: World, make_request: MakeRequest, overrides: dict[str, Any]) -> None:
    request = make_request()
    resolved = {k: (timezone.now() if v == "now" else v) for k, v in overrides.items()}
    with pytest.raises(IntegrityError):
        approval_row(request, actor=world.technical, **resolved)


def dispatch_row(request: ReplayRequest, **overrides: Any) -> Dispatch:
    values: dict[str, Any] = {
        "request": request,
        "idempotency_key": "rk_" + "k" * 20,
        "channel": "claim",
        "lease_expires_at": timezone.now() + timedelta(hours=1),
        **overrides,
    }
    with transaction.atomic():
        return Dispatch.objects.create(**values)


def test_one_dispatch_per_request_and_one_request_per_key(
    world: World, approved: ReplayRequest, make_request: MakeRequest
) -> None:
    dispatch_row(approved)
    with pytest.raises(IntegrityError):
        dispatch_row(approved, idempotency_key="rk_other")
    other = make_request(["INV-3"])
    with pytest.raises(IntegrityError):
        dispatch_row(other)  # the same key


@pytest.mark.parametrize(
    "overrides",
    [{"status": "unknown"}, {"status": "succeeded"}, {"idempotency_key": ""}, {"channel": "pigeon"}],
)
def test_dispatch_constraints(world: World, approved: ReplayRequest, overrides: dict[str, Any]) -> None:
    with pytest.raises(IntegrityError):
        dispatch_row(approved, **overrides)


def test_webhook_delivery_numbers_are_unique_and_finished_rows_have_an_end(
    world: World, approved: ReplayRequest, approve: Approve
) -> None:
    dispatch = dispatch_row(approved)
    now = timezone.now()
    WebhookDelivery.objects.create(dispatch=dispatch, number=1, url="https://x.example", timestamp=1, started_at=now)
    with pytest.raises(IntegrityError), transaction.atomic():
        WebhookDelivery.objects.create(
            dispatch=dispatch, number=1, url="https://x.example", timestamp=1, started_at=now
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        WebhookDelivery.objects.create(
            dispatch=dispatch, number=2, url="https://x.example", timestamp=1, started_at=now, status="succeeded"
        )
