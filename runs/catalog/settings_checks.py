"""Every check of an integration's stored settings, in one place: the shapes its source's adapter reads
(``settings_problems``), the transport (``transport_errors``), the security settings
(``security_errors``) and a custom integration's mapping (``mapping_errors``).

The Django admin refuses a settings JSON with any of these problems; the integration page lists those
of a value stored before a check existed (or written around the admin), so an admin sees a setting
that is not read as written instead of finding out from the deliveries.
"""

from __future__ import annotations

from typing import Any

from runs.alerts.parsers.base import settings_problems
from runs.alerts.parsers.custom.compiler import mapping_errors
from runs.alerts.parsers.custom.parser import SOURCE as CUSTOM_SOURCE
from runs.alerts.parsers.registry import source_default_settings
from runs.catalog.keys import SECURITY_KEYS, security_errors
from runs.catalog.transport import transport_errors


def integration_field_errors(*, source: str, settings: Any) -> dict[str, list[str]]:
    """What is wrong with the fields of ``settings`` (an integration's raw settings JSON, any value) that
    are not the adapter's conventions: ``transport`` or ``transport.<field>``, the ``SECURITY_KEYS``,
    and ``mapping`` or ``mapping.<path>`` for a custom integration. Returns field -> messages, empty when
    each is read as written (``integration_transport`` and ``integration_security`` read a wrong value as
    their defaults). A value that is not an object has none of these fields: ``settings_problems`` names
    it."""
    if not isinstance(settings, dict):
        return {}
    errors: dict[str, list[str]] = {}
    for field, problems in transport_errors(settings.get("transport")).items():
        errors[field if field == "transport" else f"transport.{field}"] = problems
    errors |= security_errors(source=source, values={k: settings[k] for k in SECURITY_KEYS if k in settings})
    if source == CUSTOM_SOURCE and "mapping" in settings:
        for path, problems in mapping_errors(settings["mapping"]).items():
            errors[path if path == "mapping" else f"mapping.{path}"] = problems
    return errors


def integration_settings_messages(*, source: str, settings: Any) -> list[str]:
    """Every problem of ``settings`` for ``source`` as sentences a person can act on: first each adapter
    key of the wrong shape (``"<key> <problem>."``, ``"The settings <problem>."`` for the whole value;
    ``settings_problems``), then each other field's ``"<field>: <message>"``
    (``integration_field_errors``), each part sorted by field. Empty when every value is read as
    written."""
    shape = settings_problems(source_default_settings(source), settings)
    messages = [f"{key or 'The settings'} {problem}." for key, problem in sorted(shape.items())]
    return messages + integration_field_messages(source=source, settings=settings)


def integration_field_messages(*, source: str, settings: Any) -> list[str]:
    """``integration_field_errors`` as ``"<field>: <message>"`` sentences, sorted by field."""
    fields = integration_field_errors(source=source, settings=settings)
    return [f"{field}: {message}" for field, problems in sorted(fields.items()) for message in problems]
