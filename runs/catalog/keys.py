"""Key rotation and an integration's security settings (signature secret, extra redaction names).

Grants, revocations and key creation live in ``runs.catalog.services``; everything here is audited.

Where the signing secret lives: a verifier needs the raw secret, so it cannot be stored hashed, and
storing it encrypted in the database would need an encryption key kept beside the database anyway.
The integration's settings therefore name an environment variable (``HANDOVER_SIGNING_SECRET_*``,
read through ``handover.env`` so ``NAME_FILE`` works for container secrets); the secret itself is
never in the database, its backups, the admin, the API or the audit trail. Rotating it is a
deployment change: set the new value, restart the web processes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from handover.core.edits import edit_merge
from handover.core.errors import DomainError, InvalidTransition
from handover.core.people import Person
from handover.env import env
from runs.alerts.parsers.base import storable_text
from runs.alerts.parsers.registry import get_adapter
from runs.alerts.redaction import redact_names_listed
from runs.alerts.signatures import ALGORITHMS, ENCODINGS, SCHEMES
from runs.audit.services import audit_record
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import IssuedKey, integration_key_create, integration_key_revoke

SIGNING_SECRET_ENV_PATTERN = re.compile(r"^HANDOVER_SIGNING_SECRET_[A-Z0-9_]{1,60}$")
SIGNATURE_DEFAULTS: dict[str, Any] = {
    "signing_secret_env": "",
    "signature_header": "X-Handover-Signature",
    "timestamp_header": "X-Handover-Timestamp",
    "signature_tolerance_seconds": 300,
    "signature_scheme": "ts:body",
    "signature_algorithm": "sha256",
    "signature_encoding": "hex",
}
SECURITY_LABELS = {
    "redact_names": "the redaction names",
    "signing_secret_env": "the signing secret variable",
    "signature_header": "the signature header",
    "timestamp_header": "the timestamp header",
    "signature_tolerance_seconds": "the largest timestamp age",
    "signature_scheme": "the signature scheme",
    "signature_algorithm": "the signature algorithm",
    "signature_encoding": "the signature encoding",
}
_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,100}$")
_REDACT_NAME = re.compile(r"^[\w.\-]{1,100}$")
MAX_ROTATION_GRACE_SECONDS = 7 * 24 * 3600


def integration_key_rotate(*, key: IntegrationKey, actor: Person | None, grace_seconds: int = 0) -> IssuedKey:
    """Issue a new key with the old key's integration, label and tenant binding; revoke the old one.

    ``grace_seconds`` (0 to 7 days) keeps the old key working that long, so senders can switch
    without losing alerts. Raises ``InvalidTransition`` for a revoked key, ``DomainError`` for a
    grace period out of range. Side effects: a new IntegrationKey; the old key's ``revoked_at``;
    AuditEvents ``key_rotate`` and ``key_revoke``. Returns the new key (its secret shown once).
    """
    if not 0 <= grace_seconds <= MAX_ROTATION_GRACE_SECONDS:
        raise DomainError("The grace period must be between 0 seconds and 7 days.")
    with transaction.atomic():
        old = IntegrationKey.objects.select_for_update().select_related("integration").get(pk=key.pk)
        if old.revoked_at is not None:
            raise InvalidTransition(f"The key {old.prefix}… is revoked; issue a new key instead of rotating it.")
        issued = integration_key_create(
            integration=old.integration,
            tenants=list(old.tenants.all()),
            all_tenants=old.all_tenants,
            created_by=actor,
            label=old.label,
            action="key_rotate",
            kind=old.kind,
        )
        integration_key_revoke(key=old, actor=actor, at=timezone.now() + timedelta(seconds=grace_seconds))
    return issued


def signing_secret(name: str) -> str:
    """The signing secret the environment holds under ``name`` (``IntegrationSecurity.signing_secret_env``).

    Only a ``HANDOVER_SIGNING_SECRET_<NAME>`` variable is ever read: a name the settings hold in any
    other form (edited raw: a number, another variable of the process, a NUL or a lone surrogate, which
    the environment cannot even be asked for) reads as no secret, so its posts are refused with 503 as
    for a secret not set -- never accepted unsigned, never a server error. Raises nothing.
    """
    if not SIGNING_SECRET_ENV_PATTERN.fullmatch(name):
        return ""
    return str(env.str(name, default=""))


@dataclass(frozen=True)
class IntegrationSecurity:
    """An integration's security settings as the ingestion endpoint reads them.

    ``redact_names``: extra key names whose values are redacted anywhere in a payload (case-
    insensitive), on top of the source's own field paths. ``signing_secret_env``: the environment
    variable holding the HMAC secret; empty means posts are not signed. ``signature_scheme``,
    ``signature_algorithm`` and ``signature_encoding``: what is signed and how the digest is sent
    (``runs.alerts.signatures``).
    """

    redact_names: tuple[str, ...]
    signing_secret_env: str
    signature_header: str
    timestamp_header: str
    signature_tolerance_seconds: int
    signature_scheme: str = "ts:body"
    signature_algorithm: str = "sha256"
    signature_encoding: str = "hex"


def integration_security(*, integration: Integration) -> IntegrationSecurity:
    """Read an integration's security settings, with defaults for anything unset or malformed."""
    raw = integration.settings if isinstance(integration.settings, dict) else {}
    tolerance = raw.get("signature_tolerance_seconds")
    return IntegrationSecurity(
        redact_names=redact_names_listed(raw),
        # shown on pages: a lone surrogate (SQLite only) as U+FFFD; such a name is never read (signing_secret)
        signing_secret_env=storable_text(str(raw.get("signing_secret_env") or "")),
        signature_header=str(raw.get("signature_header") or SIGNATURE_DEFAULTS["signature_header"]),
        timestamp_header=str(raw.get("timestamp_header") or SIGNATURE_DEFAULTS["timestamp_header"]),
        signature_tolerance_seconds=tolerance
        if isinstance(tolerance, int) and not isinstance(tolerance, bool) and tolerance > 0
        else SIGNATURE_DEFAULTS["signature_tolerance_seconds"],
        signature_scheme=_choice(raw, "signature_scheme", SCHEMES),
        signature_algorithm=_choice(raw, "signature_algorithm", tuple(ALGORITHMS)),
        signature_encoding=_choice(raw, "signature_encoding", ENCODINGS),
    )


def security_values(security: IntegrationSecurity) -> dict[str, Any]:
    """``security`` as the field -> value mapping ``integration_security_update`` compares and stores
    (``redact_names`` a list): a security page's base (``handover.core.edits``)."""
    values = asdict(security)
    values["redact_names"] = _names_normalised(security.redact_names)
    return values


def _names_normalised(names: Iterable[str]) -> list[str]:
    """Redaction names as stored: stripped, each once, sorted without regard to case."""
    return sorted({n.strip() for n in names if n.strip()}, key=str.casefold)


def _choice(raw: dict[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = raw.get(name)
    return value if isinstance(value, str) and value in allowed else str(SIGNATURE_DEFAULTS[name])


def source_can_sign(source: str) -> bool:
    """Whether senders of ``source`` can sign their posts (the adapter's ``CAN_SIGN``, default yes).

    Alertmanager's webhook, a Kubernetes watcher's object dump and an EventBridge dead-letter message
    carry no signature of their own (each adapter's docstring and docs/integrations/<source>.md).
    """
    adapter = get_adapter(source)
    return bool(getattr(adapter, "CAN_SIGN", True)) if adapter is not None else False


# the security settings' keys in ``Integration.settings`` (``integration_security_update`` writes them)
SECURITY_KEYS = (
    "redact_names",
    "signing_secret_env",
    "signature_header",
    "timestamp_header",
    "signature_tolerance_seconds",
    "signature_scheme",
    "signature_algorithm",
    "signature_encoding",
)


def security_errors(*, source: str, values: dict[str, Any]) -> dict[str, list[str]]:
    """What is wrong with security settings about to be stored for an integration of ``source``.

    ``values``: some of ``SECURITY_KEYS`` -> value as it would be stored (a key left out is not
    checked): ``redact_names`` a list of key names, ``signing_secret_env`` empty or
    ``HANDOVER_SIGNING_SECRET_<NAME>`` (and only for a source whose senders can sign), the headers HTTP
    token names, ``signature_tolerance_seconds`` 30 to 3600, the scheme, algorithm and encoding among
    ``runs.alerts.signatures``' values. Returns key -> messages (empty when all can be stored). The one
    check of the security page, its API and the Django admin's raw settings.
    """
    errors: dict[str, list[str]] = {}
    if "redact_names" in values:
        names = values["redact_names"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            errors["redact_names"] = ["A list of key names."]
        else:
            bad = [n for n in names if not _REDACT_NAME.match(n)]
            if bad:
                errors["redact_names"] = [f"Not a key name: {', '.join(bad)} (letters, digits, _ . - only)."]
    env_name = values.get("signing_secret_env", "")
    if not isinstance(env_name, str) or (env_name and not SIGNING_SECRET_ENV_PATTERN.match(env_name)):
        errors["signing_secret_env"] = ["Name a variable HANDOVER_SIGNING_SECRET_<NAME> (A-Z, 0-9, _)."]
    elif env_name and not source_can_sign(source):
        errors["signing_secret_env"] = [
            f"Senders of {source} cannot sign their posts: requiring a signature would refuse them all."
        ]
    for field in ("signature_header", "timestamp_header"):
        if field in values and not (isinstance(values[field], str) and _HEADER_NAME.match(values[field])):
            errors[field] = ["An HTTP header name: letters, digits and dashes."]
    if "signature_tolerance_seconds" in values:
        tolerance = values["signature_tolerance_seconds"]
        if isinstance(tolerance, bool) or not isinstance(tolerance, int) or not 30 <= tolerance <= 3600:
            errors["signature_tolerance_seconds"] = ["Between 30 and 3600 seconds."]
    for field, allowed in (
        ("signature_scheme", SCHEMES),
        ("signature_algorithm", tuple(ALGORITHMS)),
        ("signature_encoding", ENCODINGS),
    ):
        if field in values and values[field] not in allowed:
            errors[field] = [f"One of: {', '.join(allowed)}."]
    return errors


def integration_security_update(
    *,
    integration: Integration,
    actor: Person | None,
    redact_names: list[str],
    signing_secret_env: str = "",
    signature_header: str = "",
    timestamp_header: str = "",
    signature_tolerance_seconds: int = 300,
    signature_scheme: str = "ts:body",
    signature_algorithm: str = "sha256",
    signature_encoding: str = "hex",
    based_on: Mapping[str, Any] | None = None,
) -> Integration:
    """Set an integration's extra redaction names and its optional signature verification.

    ``signing_secret_env`` must be empty or match ``HANDOVER_SIGNING_SECRET_[A-Z0-9_]+`` (the
    variable's value is the secret; see the module docstring). Header names are HTTP token
    characters; ``signature_tolerance_seconds`` is 30 to 3600 (how old a signed timestamp may be);
    ``signature_scheme``, ``signature_algorithm`` and ``signature_encoding`` are among
    ``runs.alerts.signatures``' values. Requiring signatures of a source whose senders cannot sign
    (``source_can_sign``) is refused: every post would be refused. Raises ``DomainError`` (with
    ``errors`` per field) on bad input. ``based_on``: the values the page showed (``security_values``),
    so that a field left as shown keeps what someone else saved meanwhile (``edit_merge``; raises
    ``EditedMeanwhile`` when both changed one field); None writes every value. Side effects: the
    integration's ``settings`` keys above; an AuditEvent ``integration_update`` naming what
    changed (the variable's name, never its value).
    """
    names = _names_normalised(redact_names)
    env_name = signing_secret_env.strip()
    signature_header = signature_header.strip() or SIGNATURE_DEFAULTS["signature_header"]
    timestamp_header = timestamp_header.strip() or SIGNATURE_DEFAULTS["timestamp_header"]
    wanted = {
        "redact_names": names,
        "signing_secret_env": env_name,
        "signature_header": signature_header,
        "timestamp_header": timestamp_header,
        "signature_tolerance_seconds": signature_tolerance_seconds,
        "signature_scheme": signature_scheme,
        "signature_algorithm": signature_algorithm,
        "signature_encoding": signature_encoding,
    }
    errors = security_errors(source=integration.source, values=wanted)
    if errors:
        raise DomainError("Check the integration's security settings.", errors=errors)
    with transaction.atomic():
        locked = Integration.objects.select_for_update().get(pk=integration.pk)
        current = dict(locked.settings) if isinstance(locked.settings, dict) else {}
        before = integration_security(integration=locked)
        kept = edit_merge(
            posted=wanted,
            based_on=based_on,
            current=security_values(before),
            labels=SECURITY_LABELS,
            what=f"integration {locked.name}'s security settings",
        )
        changed = {k: v for k, v in kept.items() if current.get(k, SIGNATURE_DEFAULTS.get(k, [])) != v}
        if changed:
            current.update(kept)
            locked.settings = current
            locked.save(update_fields=["settings", "updated_at"])
            audit_record(
                actor=actor,
                action="integration_update",
                summary=f"Security settings of integration {locked.name} changed: {', '.join(sorted(changed))}",
                is_all_tenants=True,
                obj=locked,
                data={
                    "changed": sorted(changed),
                    "before": {k: getattr(before, k) for k in sorted(changed)},
                    "after": {k: v for k, v in kept.items() if k in changed},
                },
            )
    integration.refresh_from_db()
    return integration
