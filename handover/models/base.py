"""Shared model base (``TimeStampedModel``) and per-person display preferences."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


class TimeStampedModel(models.Model):
    """Abstract base: ``created_at`` (indexed, UTC) and ``updated_at``."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def validate_time_zone(value: str) -> None:
    """Raise ValidationError unless ``value`` is an IANA zone name known to zoneinfo."""
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f"{value!r} is not an IANA time zone (e.g. Europe/Berlin).") from exc


class UserPreference(TimeStampedModel):
    """A person's display settings: the IANA zone times are shown in (UTC stays on hover)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])

    def __str__(self) -> str:
        return f"{self.user} ({self.time_zone})"
