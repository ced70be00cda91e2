"""A person's display preferences."""

from __future__ import annotations

from handover.accounts.preference_models import UserPreference
from handover.core.people import Person


def user_preference_set(*, user: Person, time_zone: str) -> UserPreference:
    """Store the IANA zone a person's pages show times in. Validates the zone (ValidationError)."""
    preference, _ = UserPreference.objects.get_or_create(user=user)
    preference.time_zone = time_zone
    preference.full_clean()
    preference.save(update_fields=["time_zone", "updated_at"])
    return preference
