"""An integration's conventions: where a built-in source's adapter reads the job, tenant, environment,
execution id, window and times in the sender's payload, and the defaults it falls back to.

They are the adapter's ``DEFAULT_SETTINGS`` (documented per source in docs/integrations/<source>.md),
laid over by the integration's ``settings``; this module edits them as named fields, on the
integration page and over the API, instead of raw settings JSON. A value is a dotted path (``labels.tenant``),
a list of paths tried in order, a template or a constant the adapter documents, or empty for the
adapter's default. Custom integrations keep their mapping elsewhere (``runs.alerts.mapping``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from handover.core.edits import edit_merge, edit_precondition
from handover.core.errors import DomainError
from handover.core.people import Person
from runs.alerts.parsers.base import settings_problems
from runs.alerts.parsers.registry import source_default_settings
from runs.audit.services import audit_record
from runs.catalog.models import Integration
from runs.catalog.selectors import integration_edit_values

# what a convention may hold: paths, templates ({fingerprint}#{attempt}), slugs, zones
_VALUE = re.compile(r"^[\w.\-{}#:/@*\[\] ]{1,200}$", re.UNICODE)
NOT_CONVENTIONS = frozenset({"mapping"})


def integration_conventions(*, integration: Integration) -> dict[str, Any]:
    """The conventions in force: each key of the adapter's defaults with the integration's value over it."""
    defaults = source_default_settings(integration.source)
    own = integration.settings if isinstance(integration.settings, dict) else {}
    return {k: own.get(k, v) for k, v in defaults.items() if k not in NOT_CONVENTIONS and _editable(v)}


def convention_text(value: Any) -> str:
    """A convention's value as the integration page shows and reads it: a list as ``a, b``, None as ``""``."""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _editable(value: Any) -> bool:
    """Text, empty or a list of texts: what a field edits. Tables (status maps, aliases) and nested
    lists (Airflow's window pairs) stay in the adapter's settings, documented per source."""
    return (
        value is None or isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    )


def _clean(value: Any) -> tuple[Any, str | None]:
    """``value`` with its texts stripped, or the problem with their characters (``_VALUE``); an empty
    value is ``None`` (the default again). Only characters: a value of the wrong shape is returned as it
    is, for the shape rule the adapter reads by (``settings_problems``) to name."""
    if value is None or value == "" or value == []:
        return None, None
    values = value if isinstance(value, list) else [value]
    bad = [v for v in values if isinstance(v, str) and not _VALUE.match(v.strip())]
    if bad:
        return None, f"not a path, template or name: {bad[0][:60]!r}"
    if not all(isinstance(v, str) for v in values):
        return value, None
    cleaned = [v.strip() for v in values]
    return (cleaned if isinstance(value, list) else cleaned[0]), None


def integration_conventions_update(
    *,
    integration: Integration,
    actor: Person | None,
    values: dict[str, Any],
    based_on: Mapping[str, str] | None = None,
    if_match: str | None = None,
) -> Integration:
    """Set some of an integration's conventions; an empty value (None, "", []) returns a key to its default.

    ``values``: key -> a string or a list of strings (tried in order). Keys are those of the source's
    adapter ``DEFAULT_SETTINGS`` (``integration_conventions``). ``based_on``: key -> the value the page
    showed (``convention_text``) for the keys it posts; a key someone else changed meanwhile to another
    value is refused (``EditedMeanwhile``, ``handover.core.edits``) and nothing is saved; None checks
    nothing. ``if_match``: the API's ``If-Match`` header (None: none), compared under the row's lock with
    the integration's ``ETag`` (``integration_edit_values``): any change since raises PreconditionFailed
    (412), nothing written. Raises ``DomainError`` (``errors`` per key) for an unknown key or a value that is not a
    path, template or name. Side effects: the integration's ``settings``; an AuditEvent
    ``integration_update`` naming the keys changed.
    """
    allowed = integration_conventions(integration=integration)
    defaults = source_default_settings(integration.source)
    errors: dict[str, list[str]] = {}
    cleaned: dict[str, Any] = {}
    for key, value in values.items():
        if key not in allowed:
            errors[key] = [f"{integration.source} has no convention {key!r}"]
            continue
        cleaned[key], problem = _clean(value)
        # the shape the adapter reads (one text, or paths tried in order): what ingestion checks too
        problem = problem or settings_problems(defaults, {key: cleaned[key]}).get(key)
        if problem:
            errors[key] = [problem]
    if errors:
        raise DomainError("Check the integration's conventions.", errors=errors)
    with transaction.atomic():
        locked = Integration.objects.select_for_update().get(pk=integration.pk)
        edit_precondition(if_match=if_match, current=integration_edit_values(locked), what=f"integration {locked.name}")
        if based_on is not None:
            in_force = integration_conventions(integration=locked)
            edit_merge(
                posted={k: convention_text(v) for k, v in cleaned.items()},
                based_on=based_on,
                current={k: convention_text(v) for k, v in in_force.items()},
                what=f"integration {locked.name}'s conventions",
            )
        current = dict(locked.settings) if isinstance(locked.settings, dict) else {}
        changed = []
        for key, value in cleaned.items():
            if value is None:
                if key in current:
                    current.pop(key)
                    changed.append(key)
            elif current.get(key) != value:
                current[key] = value
                changed.append(key)
        if changed:
            locked.settings = current
            locked.save(update_fields=["settings", "updated_at"])
            audit_record(
                actor=actor,
                action="integration_update",
                summary=f"Conventions of integration {locked.name} changed: {', '.join(sorted(changed))}",
                is_all_tenants=True,
                obj=locked,
                data={"changed": sorted(changed), "after": {k: current.get(k) for k in sorted(changed)}},
            )
    integration.refresh_from_db()
    return integration
