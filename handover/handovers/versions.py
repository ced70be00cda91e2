"""Optimistic concurrency for handovers and residual exceptions: a version raised by every write, sent
as the ``ETag``; an edit names the version it was based on (body ``version`` or ``If-Match``).

A stale body version answers 409 ``edit-conflict`` with the current version and texts (the page shows
both texts side by side); a stale ``If-Match`` alone answers 412; an API edit naming neither 428
(RFC 9110 §13.1.1 If-Match, RFC 6585 §3 428 Precondition Required). See docs/api-changes.md.
"""

from __future__ import annotations

import re
from typing import Any

from handover.core.errors import DomainError, PreconditionFailed

_ETAG = re.compile(r'^\s*(?:W/)?"?(\d{1,18})"?\s*$')


class EditConflict(DomainError):
    """The edit was based on an older version (body ``version``): 409 with the current version and texts."""

    status = 409
    type = "edit-conflict"
    title = "Edited by someone else meanwhile"

    def __init__(self, detail: str, *, current_version: int, current: dict[str, Any]) -> None:
        super().__init__(detail, errors={"version": [f"the current version is {current_version}"]})
        self.current_version = current_version
        self.current = current
        self.extra = {"current_version": current_version, "current": current}


class PreconditionRequired(DomainError):
    """An API edit that names no base version, neither in the body nor in ``If-Match`` (428)."""

    status = 428
    type = "precondition-required"
    title = "Precondition required"


def etag(version: int) -> str:
    """The ``ETag`` value of a version: ``"<version>"`` (a strong validator)."""
    return f'"{version}"'


def if_match_version(header: str | None) -> int | None:
    """The version an ``If-Match`` header names (``"7"``, ``W/"7"`` or ``7``); None when absent.

    Raises PreconditionFailed for a value that names no version of ours (``*``, a list, garbage):
    it cannot match the current one.
    """
    if header is None or not header.strip():
        return None
    found = _ETAG.match(header)
    if found is None:
        raise PreconditionFailed(f"If-Match {header.strip()[:40]!r} names no version of this handover.")
    return int(found.group(1))


def version_check(
    *, current_version: int, base_version: int | None, via_if_match: bool, current: dict[str, Any], what: str
) -> None:
    """Refuse a write based on a stale version; return None when ``base_version`` is current (or not given).

    ``via_if_match``: the base came from ``If-Match`` only (412) rather than the body (409 with
    ``current``: the current texts). ``what`` names the object in the message.
    """
    if base_version is None or base_version == current_version:
        return
    if via_if_match:
        raise PreconditionFailed(
            f"The {what} is at version {current_version}, not {base_version}: read it again before editing."
        )
    raise EditConflict(
        f"The {what} was changed by someone else (now version {current_version}; you edited version "
        f"{base_version}). Nothing was saved: compare your text with the current one.",
        current_version=current_version,
        current=current,
    )
