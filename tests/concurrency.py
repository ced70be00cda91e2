"""Real threads released together at the contended call (PostgreSQL concurrency tests, docs/architecture.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db import connection

T = TypeVar("T")


def run_concurrently(calls: Sequence[Callable[[], T]], *, timeout_seconds: float = 120) -> list[T]:
    """Run each of ``calls`` in a thread of its own, all released by one ``threading.Barrier`` just before
    the call, and return what each returned, in the order of ``calls``.

    Anything a call raises fails the test: once the threads have ended, it is raised here (several errors
    as one ``BaseExceptionGroup``, in the order of ``calls``). A call that expects to lose (a refusal,
    a conflict) catches that error itself and returns what the test asserts. A thread still running
    ``timeout_seconds`` after the threads started fails the test too. Each thread closes its own database
    connection when its call ends.
    """
    count = len(calls)
    barrier = threading.Barrier(count)
    returned: dict[int, T] = {}
    errors: dict[int, BaseException] = {}

    def target(position: int) -> None:
        try:
            barrier.wait(timeout=30)  # every thread reaches the contended call together
            returned[position] = calls[position]()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
            errors[position] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(position,)) for position in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_seconds
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    running = sum(thread.is_alive() for thread in threads)
    raised = [errors[position] for position in sorted(errors)]
    if len(raised) == 1:
        raise raised[0]
    if raised:
        raise BaseExceptionGroup(f"{len(raised)} of {count} concurrent calls raised", raised)
    assert running == 0, f"{running} of {count} threads still running after {timeout_seconds} s"
    return [returned[position] for position in range(count)]
