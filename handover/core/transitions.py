"""The one transition helper every state machine wraps: a guarded UPDATE from a transition table.

A stateful model keeps one ``status`` field and a table beside it, ``TRANSITIONS``: action ->
(allowed source statuses, target status) (docs/architecture.md "State machines"). ``transition``
performs one action on one row the same way for every model:

1. read the row's status; if it is an allowed source, UPDATE the row filtered on its primary key
   *and* that status (compare-and-set: a concurrent change makes the UPDATE a no-op), setting the
   target status with the caller's stamps;
2. if nothing changed and the row already has the target status, it is returned with ``moved``
   False (idempotent); otherwise ``InvalidTransition`` (409) names the current status;
3. in the same transaction, ``on_moved`` writes what goes with the change (its timeline event).

Every performer returns the one shape, ``Transitioned(obj, moved)`` (a pair: ``row, moved = ...``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

from django.db import models, transaction

from handover.core.errors import InvalidTransition

M = TypeVar("M", bound=models.Model)

Table = Mapping[str, tuple[frozenset[str], str]]


class Transitioned(NamedTuple, Generic[M]):
    """What a transition returns: the row as it is now, and whether this call moved it (False: it already
    had the target status)."""

    obj: M
    moved: bool


def transition(
    *,
    queryset: models.QuerySet[M],
    pk: Any,
    table: Table,
    action: str,
    values: Mapping[str, Any] | None = None,
    noun: str,
    guard: Mapping[str, Any] | None = None,
    on_moved: Callable[[M, str], None] | None = None,
) -> Transitioned[M]:
    """Move the row ``pk`` of ``queryset`` by ``action`` (a key of ``table``) with a guarded UPDATE.

    ``values``: the stamps set with the status (``*_at``, ``*_by``, reasons); ``guard``: extra
    filters the row must match (e.g. a lease still running), else the move is refused like a wrong
    status; ``noun``: the row in the refusal ("the dispatch"). The row is reloaded through
    ``queryset`` (its ``select_related``). ``on_moved(row, before)`` runs in the same transaction
    when the row moved (``before``: the status it had). Raises ``InvalidTransition`` (409) when the
    row may not move and is not already in the target status; ``KeyError`` for an unknown action.
    """
    allowed_from, target = table[action]
    model = queryset.model
    with transaction.atomic():
        before = model._default_manager.filter(pk=pk).values_list("status", flat=True).first()
        updated = 0
        if before in allowed_from:
            updated = (
                model._default_manager.filter(pk=pk, status=before)
                .filter(**(guard or {}))
                .update(status=target, **(values or {}))
            )
        current = queryset.get(pk=pk)
        if not updated:
            status = getattr(current, "status")  # noqa: B009 - every stateful model has it
            if status == target:
                return Transitioned(current, False)
            raise InvalidTransition(
                f"{noun[:1].upper()}{noun[1:]} is {status}; it cannot {action.replace('_', ' ')} "
                f"(allowed from: {', '.join(sorted(allowed_from)) or 'nothing'}).",
                errors={"status": [str(status)]},
            )
        if on_moved is not None:
            on_moved(current, str(before))
    return Transitioned(current, True)
