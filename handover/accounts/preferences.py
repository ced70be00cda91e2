"""A person's display preferences."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from handover.accounts.preference_models import UserPreference


def user_preference_set(*, user: AbstractBaseUser, time_zone: str) -> UserPreference:
    """Store the IANA zone a person's pages show times in. Validates the zone (ValidationError)."""
    preference, _ = UserPreference.objects.get_or_create(user=user)
    preference.time_zone = time_zone
    preference.full_clean()
    preference.save(update_fields=["time_zone", "updated_at"])
    return preference
