"""An integration's transport settings: GET ingestion (opt-in) and the body decoder.

Kept in ``Integration.settings["transport"]`` as ``{"allow_get": bool, "decoder": {"kind": ...,
"item_types": [...]}}``; read with defaults by ``integration_transport``, changed only by
``integration_transport_update`` (audited). How keys travel (header or URL) is the key's kind, not a
setting (``IntegrationKey.Kind``); signatures are the security settings (``runs.catalog.keys``).
The guide for senders: docs/integrations/transport.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from handover.core.edits import edit_merge, edit_precondition
from handover.core.errors import DomainError
from handover.core.people import Person
from runs.alerts.decoders import decoder_problem
from runs.audit.services import audit_record
from runs.catalog.models import Integration
from runs.catalog.selectors import integration_edit_values


@dataclass(frozen=True)
class IntegrationTransport:
    """How an integration's posts arrive: ``allow_get`` (status in the query string of a GET to its URL
    key address) and ``decoder`` (``{"kind": "json"|"ndjson"|"envelope"|"form", "item_types": [...]}``)."""

    allow_get: bool = False
    decoder: dict[str, Any] = field(default_factory=lambda: {"kind": "json"})


def integration_transport(*, integration: Integration) -> IntegrationTransport:
    """Read an integration's transport settings; anything unset or malformed reads as the default."""
    raw = integration.settings.get("transport") if isinstance(integration.settings, dict) else None
    raw = raw if isinstance(raw, dict) else {}
    decoder = raw.get("decoder")
    if not isinstance(decoder, dict) or decoder_problem(decoder) is not None:
        decoder = {"kind": "json"}
    return IntegrationTransport(allow_get=raw.get("allow_get") is True, decoder=dict(decoder))


def transport_errors(raw: Any) -> dict[str, list[str]]:
    """What is wrong with ``settings["transport"]`` as stored raw (the Django admin edits it as JSON).

    ``raw``: the value, or None when unset. It must be ``{"allow_get": true|false, "decoder": {...}}``
    (either key may be left out) with a decoder ``decoder_problem`` accepts. Returns field -> messages,
    empty when it can be stored: ``integration_transport`` would otherwise read it as the defaults,
    silently.
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        return {"transport": ['An object: {"allow_get": true or false, "decoder": {"kind": ...}}.']}
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(raw) - {"allow_get", "decoder"})
    if unknown:
        errors["transport"] = [f"Not a transport setting: {', '.join(map(str, unknown))} (allow_get, decoder)."]
    if "allow_get" in raw and not isinstance(raw["allow_get"], bool):
        errors["allow_get"] = ["true or false."]
    if "decoder" in raw:
        decoder = raw["decoder"]
        problem = decoder_problem(decoder) if isinstance(decoder, dict) else 'An object: {"kind": "json"}.'
        if problem is not None:
            errors["decoder"] = [problem]
    return errors


def transport_values(transport: IntegrationTransport) -> dict[str, Any]:
    """``transport`` as the field -> value mapping ``integration_transport_update`` compares and stores:
    a transport form's base (``handover.core.edits``)."""
    return {"allow_get": transport.allow_get, "decoder": dict(transport.decoder)}


def integration_transport_update(
    *,
    integration: Integration,
    actor: Person | None,
    allow_get: bool,
    decoder_kind: str = "json",
    item_types: list[str] | None = None,
    based_on: Mapping[str, Any] | None = None,
    if_match: str | None = None,
) -> Integration:
    """Set whether GET ingestion is allowed and which decoder reads the integration's posts.

    ``decoder_kind``: ``json``, ``ndjson``, ``envelope`` or ``form`` (``runs.alerts.decoders``);
    ``item_types``: for ``envelope``, the item types kept (empty: all). Raises ``DomainError`` (with
    ``errors`` per field) for a bad decoder. ``based_on``: the values the page showed
    (``transport_values``): a value left as shown keeps what someone else saved meanwhile, one both
    changed raises ``EditedMeanwhile`` (``handover.core.edits``); None writes both. ``if_match``: the API's
    ``If-Match`` header (None: none), compared under the row's lock with the integration's ``ETag``
    (``integration_edit_values``): any change since raises PreconditionFailed (412), nothing written. Side effects:
    ``settings["transport"]``; an AuditEvent ``integration_update`` naming what changed. Stored bodies
    are decoded again on reprocessing, so a decoder change applies to reprocessed deliveries too.
    """
    decoder: dict[str, Any] = {"kind": decoder_kind}
    types = sorted({t.strip() for t in (item_types or []) if t.strip()})
    if types:
        decoder["item_types"] = types
    problem = decoder_problem(decoder)
    if problem is not None:
        raise DomainError("Check the integration's transport settings.", errors={"decoder": [problem]})
    wanted = {"allow_get": bool(allow_get), "decoder": decoder}
    with transaction.atomic():
        locked = Integration.objects.select_for_update().get(pk=integration.pk)
        edit_precondition(if_match=if_match, current=integration_edit_values(locked), what=f"integration {locked.name}")
        before = integration_transport(integration=locked)
        kept = edit_merge(
            posted=wanted,
            based_on=based_on,
            current=transport_values(before),
            labels={"allow_get": "GET ingestion", "decoder": "the body decoder"},
            what=f"integration {locked.name}'s transport",
        )
        wanted = {**transport_values(before), **kept}
        changed = sorted(k for k, v in wanted.items() if getattr(before, k) != v)
        if changed:
            current = dict(locked.settings) if isinstance(locked.settings, dict) else {}
            current["transport"] = wanted
            locked.settings = current
            locked.save(update_fields=["settings", "updated_at"])
            audit_record(
                actor=actor,
                action="integration_update",
                summary=f"Transport settings of integration {locked.name} changed: {', '.join(changed)}",
                is_all_tenants=True,
                obj=locked,
                data={"changed": changed, "after": {k: wanted[k] for k in changed}},
            )
    integration.refresh_from_db()
    return integration
