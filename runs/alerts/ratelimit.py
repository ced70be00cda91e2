"""A sliding-window rate limit kept in the Django cache (per integration key on the ingestion path).

The sliding-window counter: posts are counted in fixed windows of ``window_seconds``; the rate in
force is the current window's count plus the previous window's count weighted by how much of it
still overlaps the sliding window. Two cache keys per limited key, no per-post entries, and no
burst at a window boundary (a fixed window would allow twice the limit across one).

With Redis (production) ``incr`` is atomic; with the file cache of the embedded setup two
processes may lose an increment now and then, which only makes the limit a little more lenient.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from django.core.cache import cache


@dataclass(frozen=True)
class RateDecision:
    """Whether a post may go on; if not, ``retry_after_seconds`` until it would be allowed (>= 1)."""

    allowed: bool
    retry_after_seconds: int
    rate: float


def rate_limit_take(*, scope: str, limit: int, window_seconds: int, now: float | None = None) -> RateDecision:
    """Count one post against ``scope`` (e.g. ``ingest:<key id>``) unless that would exceed ``limit``.

    ``limit`` posts per ``window_seconds``; a limit of 0 or less turns the limit off. A refused post
    is not counted. ``now`` (UNIX seconds) is for tests. Side effects: two cache entries per scope,
    expiring after two windows; two cache calls per post allowed (read both counters, ``incr`` the current
    one), three for the window's first.
    """
    if limit <= 0:
        return RateDecision(allowed=True, retry_after_seconds=0, rate=0.0)
    window = max(1, window_seconds)
    now = time.time() if now is None else now
    bucket = int(now // window)
    elapsed = now - bucket * window
    current_key, previous_key = f"ratelimit:{scope}:{bucket}", f"ratelimit:{scope}:{bucket - 1}"
    found = cache.get_many([previous_key, current_key])
    previous, current = int(found.get(previous_key, 0)), int(found.get(current_key, 0))
    weight = (window - elapsed) / window
    rate = previous * weight + current
    if rate + 1 > limit:
        return RateDecision(
            allowed=False,
            retry_after_seconds=_retry_after(previous, current, limit, window, elapsed),
            rate=rate,
        )
    timeout = 2 * window + 1
    counted = _count(current_key, timeout)
    if cache.default_timeout is not None and cache.default_timeout < timeout:
        # a cache whose ``incr`` stores the entry again with its default timeout (the file cache)
        cache.touch(current_key, timeout=timeout)
    return RateDecision(allowed=True, retry_after_seconds=0, rate=previous * weight + counted)


def _count(key: str, timeout: int) -> int:
    """Add one to the counter ``key`` and return it: one ``incr`` once the window has its counter (one round
    trip on Redis, where it is atomic and keeps the entry's expiry); the window's first post creates it with
    ``timeout`` (``add``: of two first posts, one creates and the other increments)."""
    for _ in range(2):
        try:
            return cache.incr(key)
        except ValueError:  # no counter yet, or it expired meanwhile
            if cache.add(key, 1, timeout=timeout):
                return 1
    cache.set(key, 1, timeout=timeout)  # created and expired between our calls twice: count afresh
    return 1


def _retry_after(previous: int, current: int, limit: int, window: int, elapsed: float) -> int:
    """Seconds until one more post fits, if nothing else is posted meanwhile."""
    room = limit - 1 - current
    if room >= 0 and previous > 0:
        # still in this window: wait until the previous window's weight has decayed enough
        wait = window * (1 - room / previous) - elapsed
    else:
        # the current window is full: wait for the next one, where it becomes the weighted previous
        wait = (window - elapsed) + max(0.0, window * (1 - (limit - 1) / current)) if current else window - elapsed
    return max(1, math.ceil(wait))
