"""A person's display preferences page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from handover.accounts.preference_models import UserPreference
from handover.accounts.preferences import user_preference_set
from handover.core.models import validate_time_zone
from handover.core.people import signed_in


class PreferenceForm(forms.Form):
    time_zone = forms.CharField(
        max_length=64, validators=[validate_time_zone], help_text="IANA zone, e.g. Europe/Berlin"
    )


@login_required
def preferences(request: HttpRequest) -> HttpResponse:
    """Let a person choose the zone times are shown in (UTC stays on hover)."""
    current = UserPreference.objects.filter(user=signed_in(request.user)).first()
    form = PreferenceForm(request.POST or None, initial={"time_zone": current.time_zone if current else "UTC"})
    if request.method == "POST" and form.is_valid():
        user_preference_set(user=signed_in(request.user), time_zone=form.cleaned_data["time_zone"])
        messages.success(request, "Times are now shown in " + form.cleaned_data["time_zone"] + ".")
        return redirect("preferences")
    return render(request, "handover/accounts/preferences.html", {"form": form})
