"""Forms of the notifications and profile pages: shape only (the rules live in the services)."""

from __future__ import annotations

import zoneinfo
from functools import lru_cache
from typing import Any

from django import forms

from handover.core.models import validate_time_zone
from handover.notifications.events import CHANNELS, EVENTS


@lru_cache(maxsize=1)
def time_zone_names() -> list[str]:
    """Every IANA zone zoneinfo knows, sorted (the time zone field's list)."""
    return sorted(z for z in zoneinfo.available_timezones() if "/" in z or z == "UTC")


class EmailChangeForm(forms.Form):
    email = forms.EmailField(label="New notification address")
    password = forms.CharField(widget=forms.PasswordInput, label="Your password", strip=False)


class TimeZoneForm(forms.Form):
    time_zone = forms.CharField(
        max_length=64,
        validators=[validate_time_zone],
        widget=forms.TextInput(attrs={"list": "time-zones", "autocomplete": "off"}),
        help_text="Type to search the IANA zones, e.g. Europe/Berlin",
    )

    def clean_time_zone(self) -> str:
        value = str(self.cleaned_data["time_zone"]).strip()
        if value not in time_zone_names():
            raise forms.ValidationError("Choose a zone from the list (IANA names such as Europe/Berlin).")
        return value


class AppriseTargetForm(forms.Form):
    url = forms.CharField(
        max_length=2000,
        label="Apprise URL",
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "slack://…, msteams://…, ntfys://…"}),
    )
    label = forms.CharField(max_length=100, required=False)


class PreferencesForm(forms.Form):
    """One checkbox per event and channel: ``<event>__<channel>``."""

    def __init__(self, *args: Any, current: dict[tuple[str, str], bool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for event, label in EVENTS:
            for channel, channel_label in CHANNELS:
                self.fields[f"{event}__{channel}"] = forms.BooleanField(
                    required=False, label=f"{label} — {channel_label}", initial=current[(event, channel)]
                )

    def choices(self) -> dict[tuple[str, str], bool]:
        """The cleaned choices by (event, channel)."""
        return {tuple(name.split("__", 1)): bool(value) for name, value in self.cleaned_data.items()}  # type: ignore[misc]
