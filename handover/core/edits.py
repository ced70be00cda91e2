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

The API's whole-record form of the same guard is the ``ETag`` / ``If-Match`` pair (RFC 9110 §8.8.3,
§13.1.1), as GitHub, Kubernetes (``resourceVersion``) and Stripe use it: a record's detail answers an
``ETag`` computed from the values its edit can change (``edit_etag``), and a write that sends
``If-Match`` is refused with 412 when, under the row's lock, the record's ``ETag`` is no longer the one
sent (``edit_precondition``): any change since the read, not only a clash on one field.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from handover.core.errors import Conflict, PreconditionFailed

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


# one entity-tag of an If-Match list (RFC 9110 §8.8.3: [W/] DQUOTE *etagc DQUOTE), then a comma or the end
_ENTITY_TAG = re.compile(r'\s*(W/)?"([\x21\x23-\x7e\x80-\xff]*)"\s*(?:,|$)')


def edit_etag(values: Mapping[str, Any]) -> str:
    """The strong ``ETag`` of a record: ``"<32 hex digits>"``, from the values its edit can change.

    ``values``: field -> value as the record's edit service reads it under the row's lock (JSON values;
    anything else is taken as its ``str``). The tag is the first 128 bits of the SHA-256 of ``values`` as
    canonical JSON (keys sorted, ASCII), so it changes whenever one of those values changes and is the
    same wherever it is computed (the detail's answer, the check under the lock). Never raises.
    """
    text = json.dumps(dict(values), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return '"' + hashlib.sha256(text.encode("ascii")).hexdigest()[:32] + '"'


def edit_precondition(*, if_match: str | None, current: Mapping[str, Any], what: str) -> None:
    """Refuse a write whose ``If-Match`` does not name the record's current ``ETag``; return None otherwise.

    Call it inside the write's transaction, with ``current`` read under the row's lock (the same values
    ``edit_etag`` hashes for the record's detail), before anything is written: two writes sent with the
    same tag then cannot both pass. ``if_match``: the ``If-Match`` header as sent, or None; None or blank
    means no precondition (the write goes on as without the header). ``*`` matches any existing record;
    otherwise one of the listed tags must equal the current one by strong comparison (a weak ``W/`` tag
    never matches, RFC 9110 §13.1.1). ``what`` names the record in the message ("this problem").

    Raises PreconditionFailed (412) when no tag matches, or when the header is not ``*`` nor a list of
    quoted entity tags (RFC 9110 §13.1.1: such a header cannot match).
    """
    if if_match is None or not if_match.strip():
        return
    sent = if_match.strip()
    if sent == "*":
        return
    tags: list[str] = []
    position = 0
    while position < len(sent):
        found = _ENTITY_TAG.match(sent, position)
        if found is None:
            raise PreconditionFailed(
                f"If-Match {sent[:80]!r} is not `*` nor a quoted ETag (as the ETag header of {what} gives it): "
                "nothing was saved. Read it again and send its ETag as it was given."
            )
        if found.group(1) is None:  # a weak tag never matches under strong comparison
            tags.append(f'"{found.group(2)}"')
        position = found.end()
    if edit_etag(current) not in tags:
        raise PreconditionFailed(
            f"Someone changed {what} after you read it (ETag {sent[:80]} is no longer current): nothing was "
            "saved. Read it again, then redo your change."
        )
