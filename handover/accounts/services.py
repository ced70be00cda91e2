"""Personal API tokens (django-rest-knox): create, revoke, and record their last use.

A token acts with its owner's permissions (``Authorization: Token ho_…``). knox stores only a
SHA-512 digest beside the token's first 15 characters (``token_key``, "the prefix", which is all
we ever show again); the raw token exists once, in the value ``api_token_create`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import knox_settings

from handover.accounts.models import ApiTokenLabel, ApiTokenUse
from handover.core.errors import Conflict, DomainError, NotFound
from handover.core.people import Person
from runs.audit.models import AuditEvent
from runs.audit.services import audit_record

# ``last_used_at`` is written at most this often per token: a script polling every second must not
# turn each of its reads into a write. The cache remembers the last write (no query in between).
TOKEN_USED_RESOLUTION = timedelta(minutes=1)
TOKEN_USED_KEY = "api-token-used:{}"

# The lifetimes a person may pick, in days; those at or above the site's maximum
# (``HANDOVER_API_TOKEN_DAYS``, knox's TOKEN_TTL, also the default) give way to it.
TOKEN_EXPIRY_DAYS = (7, 30, 90, 180, 365)
# Unexpired tokens one person may hold: a script that creates a token per run must fail loudly,
# not fill the table (each authentication reads every token sharing a prefix, and the owner's list).
TOKEN_MAX_PER_PERSON = 50
LABEL_MAX_LENGTH = 100


@dataclass(frozen=True)
class IssuedApiToken:
    """A token just created: ``raw`` is the secret, held nowhere else; show it once, never log it."""

    token: AuthToken
    raw: str
    label: str


def api_token_expiry_choices() -> list[int]:
    """The lifetimes (days) a new token may have, shortest first; the last is the site's maximum
    and the default (``HANDOVER_API_TOKEN_DAYS``)."""
    longest = max(1, knox_settings.TOKEN_TTL.days)
    return [days for days in TOKEN_EXPIRY_DAYS if days < longest] + [longest]


def api_token_create(
    *,
    user: Person,
    label: str = "",
    expires_in_days: int | None = None,
    not_after: datetime | None = None,
    actor: Person | None = None,
) -> IssuedApiToken:
    """Create a personal API token for ``user``, expiring in ``expires_in_days`` days.

    ``expires_in_days`` must be one of ``api_token_expiry_choices()`` (default: the longest).
    ``not_after`` (UTC) caps the expiry: a token created with another token expires no later than
    it, so a leaked token cannot outlive its own revocation date by minting a successor. ``label``
    (stripped, at most 100 characters) says what it is for; blank stores none. ``actor`` is who
    acts (None: the system or the shell).

    Returns the token with its raw value, which is stored nowhere (knox keeps a SHA-512 digest).
    Errors: DomainError (400, ``errors`` by field) for a lifetime off the list or a long label;
    Conflict (409) when ``user`` already holds ``TOKEN_MAX_PER_PERSON`` unexpired tokens.
    Side effects, in one transaction: the ``knox.AuthToken`` row, its ``ApiTokenLabel``, and an
    audit event (by prefix only).
    """
    choices = api_token_expiry_choices()
    days = choices[-1] if expires_in_days is None else expires_in_days
    if days not in choices:
        allowed = ", ".join(str(d) for d in choices)
        raise DomainError(
            f"A token expires in {allowed} days.", errors={"expires_in_days": [f"Choose one of {allowed}."]}
        )
    label = label.strip()
    if len(label) > LABEL_MAX_LENGTH:
        raise DomainError("The label is too long.", errors={"label": [f"At most {LABEL_MAX_LENGTH} characters."]})
    now = timezone.now()
    lifetime = timedelta(days=days)
    if not_after is not None:
        if not_after <= now:
            raise DomainError("The token this request came with has expired.")
        lifetime = min(lifetime, not_after - now)
    with transaction.atomic():
        # the owner's row, locked: two creates at once count one after the other, so neither passes the cap
        list(get_user_model()._default_manager.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
        held = AuthToken.objects.filter(user=user).filter(Q(expiry__isnull=True) | Q(expiry__gt=now)).count()
        if held >= TOKEN_MAX_PER_PERSON:
            raise Conflict(f"You hold {held} API tokens, the most allowed: revoke one you no longer use first.")
        token, raw = AuthToken.objects.create(user=user, expiry=lifetime)
        if not_after is not None and token.expiry is not None and token.expiry > not_after:
            # knox adds the lifetime to its own, slightly later, "now"
            token.expiry = not_after
            token.save(update_fields=["expiry"])
        if label:
            ApiTokenLabel.objects.create(token=token, label=label)
        owner = user.get_username()
        audit_record(
            actor=actor,
            action=AuditEvent.Action.API_TOKEN_CREATE,
            summary=f"Personal API token {token.token_key}… of {owner} created"
            + (f" ({label})" if label else "")
            + f", expires {token.expiry:%Y-%m-%d %H:%M} UTC",
            subject=user,
            obj=token,
            object_ref=token.token_key,
            data={
                "prefix": token.token_key,
                "label": label,
                "owner": owner,
                "expires_at": token.expiry.isoformat() if token.expiry else None,
            },
        )
    return IssuedApiToken(token=token, raw=raw, label=label)


def api_token_revoke(*, token: AuthToken, actor: Person | None) -> AuthToken:
    """Revoke ``token`` now: the next request carrying it gets 401.

    Deletes the ``knox.AuthToken`` row (its label and last use go with it) and writes an audit
    event, in one transaction. Returns the deleted token (unsaved). Errors: NotFound (404) if it
    was revoked or cleared as expired meanwhile (no event then). The caller checks that ``actor``
    may revoke it (``handover.accounts.selectors.api_token_get`` finds only a person's own).
    """
    with transaction.atomic():
        label = ApiTokenLabel.objects.filter(token=token).values_list("label", flat=True).first() or ""
        _, deleted = AuthToken.objects.filter(pk=token.pk).delete()
        if not deleted.get(AuthToken._meta.label):
            raise NotFound("That token is already revoked or has expired.")
        owner = token.user.get_username()
        audit_record(
            actor=actor,
            action=AuditEvent.Action.API_TOKEN_REVOKE,
            summary=f"Personal API token {token.token_key}… of {owner} revoked" + (f" ({label})" if label else ""),
            subject=token.user,
            obj=token,
            object_ref=token.token_key,
            data={"prefix": token.token_key, "label": label, "owner": owner},
        )
    return token


def api_token_use_record(*, token: AuthToken, at: datetime | None = None) -> bool:
    """Record that ``token`` authenticated a request at ``at`` (default now, UTC).

    Writes the token's ``ApiTokenUse`` row (one upsert) unless it was written less than
    ``TOKEN_USED_RESOLUTION`` ago, as the cache remembers. Returns whether it wrote. Errors: none
    of its own (database errors propagate).
    """
    at = at or timezone.now()
    if not cache.add(TOKEN_USED_KEY.format(token.digest), 1, timeout=int(TOKEN_USED_RESOLUTION.total_seconds())):
        return False
    ApiTokenUse.objects.bulk_create(
        [ApiTokenUse(token_id=token.pk, last_used_at=at)],
        update_conflicts=True,
        unique_fields=["token"],
        update_fields=["last_used_at"],
    )
    return True
