"""What every app's models share: the ``TimeStampedModel`` base and the time-zone validator."""

from __future__ import annotations

import zoneinfo

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
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


# Enumerations are defined at module level and nested into their model by assignment
# (``Job.DstGap``): a nested ``Meta`` cannot see names of the class body it sits in, and each
# enum's values are needed there for its CheckConstraint.


def choices_check(name: str, field: str, choices: type[models.TextChoices]) -> models.CheckConstraint:
    """A CheckConstraint keeping ``field`` inside the enum (choices alone do not constrain the database)."""
    return models.CheckConstraint(
        condition=Q(**{f"{field}__in": choices.values}),
        name=name,
        violation_error_code="invalid_choice",
    )
