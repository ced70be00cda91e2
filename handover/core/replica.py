"""Read replica: list pages and reports read from a replica when ``DATABASE_REPLICA_URL`` is set.

Only reads a stale answer cannot harm go there: the views marked ``@replica_reads`` (the runs list,
the inbox, the handover and problem lists, the audit trail, the recurrence and supportability
reports), and only while no transaction is open on ``default`` (a view that writes reads its own
writes). Everything else -- writes, ingestion, decisions and every read that guards one (rule 5's
dispatch, the approval checks, the ledger's versions) -- stays on ``default``. Without the setting
there is no ``replica`` alias and :class:`ReplicaRouter` sends everything to ``default``
(docs/production.md "Beyond one machine").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest

REPLICA = "replica"

_replica_reads: ContextVar[bool] = ContextVar("handover_replica_reads", default=False)
_View = TypeVar("_View", bound=Callable[..., Any])


def replica_configured() -> bool:
    """Whether the ``replica`` alias exists (``DATABASE_REPLICA_URL`` was set)."""
    return REPLICA in connections.settings


def replica_reads_active() -> bool:
    """Whether the current code runs in a :func:`reading_from_replica` scope."""
    return _replica_reads.get()


@contextmanager
def reading_from_replica() -> Iterator[None]:
    """A scope whose ORM reads go to the replica (when configured and no transaction is open)."""
    token = _replica_reads.set(True)
    try:
        yield
    finally:
        _replica_reads.reset(token)


def replica_reads(view: _View) -> _View:
    """Mark a read-only view (a list page, a report) whose reads may be served by the replica.

    The signed-in person is loaded first, from ``default`` (a session created a moment ago may not
    have reached the replica yet); then the view runs in :func:`reading_from_replica`.
    """

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        getattr(request, "user", None) and request.user.is_authenticated  # load the person from default
        with reading_from_replica():
            return view(request, *args, **kwargs)

    return wrapped  # type: ignore[return-value]


class ReplicaRouter:
    """``DATABASE_ROUTERS`` entry: reads in a replica scope go to ``replica``, all else to ``default``.

    ``db_for_read`` answers ``"replica"`` only when the alias is configured, the scope is active and
    ``default`` has no open transaction; None otherwise (Django then uses ``default``). Writes are
    never routed (``default``). The replica holds the same rows, so relations are allowed between
    the two; only ``default`` is migrated (the replica follows it by replication).
    """

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if not _replica_reads.get() or not replica_configured():
            return None
        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return None  # read what this transaction wrote
        return REPLICA

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        return None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        aliases = {DEFAULT_DB_ALIAS, REPLICA}
        return True if {obj1._state.db, obj2._state.db} <= aliases else None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        return False if db == REPLICA else None
