"""Per-person display preferences."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from handover.core.models import TimeStampedModel, validate_time_zone


class UserPreference(TimeStampedModel):
    """A person's display settings: the IANA zone times are shown in (UTC stays on hover)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])

    def __str__(self) -> str:
        return f"{self.user} ({self.time_zone})"
