"""Saving a form without reverting someone else's edit: a three-way merge of the form's fields.

An edit page posts every field it shows. Two people who opened the same page and saved in turn
would otherwise each write every field, so the second save silently puts back what the first one
changed. The page therefore carries the values it was rendered with (its *base*, a hidden
``based_on`` field: ``edit_base_field``), and the service, holding the row's lock, compares:

- a field whose posted value equals its base was not touched by this person: it is not written,
  whatever is stored now;
- a field this person changed is written, unless someone else changed it meanwhile to a third
  value: then nothing is saved and ``EditedMeanwhile`` (409) names the fields, so the person reads
  the page again and redoes the change. Both sides setting the same value is no conflict.

A post without a base (a script, a page rendered before this rule) writes every field it names,
as before. This is the rule of git's and diff3's three-way merge applied per field, the usual answer
of collaborative editors (Grafana's "someone else has updated this dashboard", Jira's field-level
edit conflicts) to a lost update.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from handover.core.errors import Conflict

BASE_FIELD = "based_on"


class EditedMeanwhile(Conflict):
    """Someone else changed, since the page was read, a field this person changed too (HTTP 409)."""

    type = "edited-meanwhile"
    title = "Changed by someone else meanwhile"


def edit_merge(
    *,
    posted: Mapping[str, Any],
    based_on: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    what: str = "this",
) -> dict[str, Any]:
    """The fields of ``posted`` to write, without reverting what someone else saved meanwhile.

    ``posted``: field -> value as submitted; ``based_on``: field -> the value the page showed when it
    was rendered, or None (no base: every posted field is written, and nothing is refused);
    ``current``: field -> the value stored now, read under the row's lock. All three hold values in
    the same normalised shape (what the service stores), compared with ``==``. Returned: ``posted``
    without the fields this person left as the page showed them while someone else changed them
    (those keep the other person's value). A posted field absent from the base or from ``current``
    is written. ``labels`` name fields for the message (default: the field with ``_`` as spaces);
    ``what`` names the object ("integration X's security settings").

    Raises ``EditedMeanwhile`` naming every field that this person changed and someone else changed
    meanwhile to another value (nothing may then be written).
    """
    if based_on is None:
        return dict(posted)
    kept: dict[str, Any] = {}
    clashes: list[str] = []
    for field, value in posted.items():
        if field not in based_on or field not in current or current[field] == based_on[field]:
            kept[field] = value  # nobody else touched it: write what the page holds
        elif value == based_on[field]:
            continue  # someone else changed it and this person did not: theirs stays
        elif value == current[field]:
            kept[field] = value  # both made the same change
        else:
            clashes.append(field)
    if clashes:
        names = ", ".join((labels or {}).get(f, f.replace("_", " ")) for f in clashes)
        raise EditedMeanwhile(
            f"Someone changed {names} of {what} after you opened the page: nothing was saved. "
            "Open the page again to see their change, then redo yours.",
            errors={field: ["Changed by someone else after you opened the page."] for field in clashes},
        )
    return kept


def edit_base_field(values: Mapping[str, Any]) -> str:
    """The hidden ``based_on`` value of a page: ``values`` (JSON-serialisable) as compact JSON text."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def edit_base_read(
    data: Mapping[str, Any], fields: Iterable[str], normalise: Callable[[str, Any], Any] | None = None
) -> dict[str, Any] | None:
    """The base a post carries (``data[BASE_FIELD]``, written by ``edit_base_field``), or None.

    Only ``fields`` are kept, each passed through ``normalise(field, value)`` when given (to the shape
    the service compares). A missing, empty or unreadable base (not JSON, not an object) gives None:
    the post is then treated as one from before this rule. Never raises.
    """
    text = data.get(BASE_FIELD)
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    wanted = set(fields)
    try:
        return {k: (normalise(k, v) if normalise else v) for k, v in document.items() if k in wanted}
    except (TypeError, ValueError, AttributeError):
        return None
