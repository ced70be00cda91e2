"""The catalogue of ready-made mappings: one JSON file per tool in this folder, each built from the
tool's public documentation (linked in the file) with its own sample payloads.

A file is an export document (``{"format": "handover.mapping/v1", "mapping": {...}}``, importable as
it stands through the editor or ``PUT /api/v1/integrations/<id>/mapping/``) plus what a person needs
to connect the tool: ``title``, ``documentation`` (links), ``covers`` (what it maps, what it cannot),
``conventions`` (what to name or set in the tool), ``transport`` (key kind, decoder, GET, signature
scheme; docs/integrations/transport.md) and ``samples`` (``name``, ``body``/``text``/``query``,
``method``, ``content_type``, ``expect``: the outcome, status and execution id each must give).
The list for people: docs/integrations/catalogue.md. Pure reads of package files; no ORM.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().parent
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,80}$")


@dataclass(frozen=True)
class CatalogueEntry:
    """One ready-made mapping, as its file says (``document`` is the whole file)."""

    name: str
    title: str
    covers: str
    conventions: str
    documentation: list[str]
    transport: dict[str, Any]
    mapping: dict[str, Any]
    samples: list[dict[str, Any]]
    document: dict[str, Any]

    def export(self) -> dict[str, Any]:
        """The importable export document: ``{"format", "name", "source", "mapping"}``."""
        return {"format": self.document["format"], "name": self.name, "source": "custom", "mapping": self.mapping}


def _load(path: Path) -> CatalogueEntry:
    document = json.loads(path.read_text(encoding="utf-8"))
    return CatalogueEntry(
        name=document["name"],
        title=document["title"],
        covers=document["covers"],
        conventions=document.get("conventions", ""),
        documentation=list(document.get("documentation", [])),
        transport=dict(document.get("transport") or {}),
        mapping=dict(document["mapping"]),
        samples=list(document.get("samples", [])),
        document=document,
    )


@cache
def catalogue_entries() -> tuple[CatalogueEntry, ...]:
    """Every entry of the catalogue, by name. Read once per process (package files do not change)."""
    return tuple(sorted((_load(p) for p in FOLDER.glob("*.json")), key=lambda e: e.name))


def catalogue_entry(name: str) -> CatalogueEntry | None:
    """The entry called ``name`` (``github-actions-workflow-run``), or None."""
    if not _NAME.match(name):
        return None
    return next((e for e in catalogue_entries() if e.name == name), None)
