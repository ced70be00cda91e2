"""The ownership form of the job page: an owning team and an escalation owner (either may be empty)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from handover.notifications.models import Team
from handover.ownership.selectors import team_list_assignable


class OwnershipForm(forms.Form):
    """Team and escalation owner for a job, or (``target`` set) for one of its targets; ``based_on``: the
    owners the page showed (``handover.core.edits``)."""

    target = forms.UUIDField(required=False, widget=forms.HiddenInput)
    based_on = forms.CharField(required=False, widget=forms.HiddenInput)
    team = forms.ModelChoiceField(
        queryset=Team.objects.order_by("name"),
        to_field_name="public_id",
        required=False,
        empty_label="(no team)",
        label="Owning team",
    )
    escalation_owner = forms.ModelChoiceField(
        queryset=get_user_model().objects.filter(is_active=True).order_by("username"),
        to_field_name="username",
        required=False,
        empty_label="(nobody)",
        label="Escalation owner",
    )

    def __init__(
        self, *args: Any, prefix_for: str = "", user: Any = None, own_team: Team | None = None, **kwargs: Any
    ) -> None:
        """``user``: the teams offered are those they may name (``team_list_assignable``, as on problems),
        with ``own_team`` (the row's, whatever it is); None offers every team."""
        super().__init__(*args, **kwargs)
        if prefix_for:
            self.auto_id = f"id_{prefix_for}_%s"
        if user is not None:
            offered = team_list_assignable(user=user, keeping=own_team.pk if own_team else None).order_by("name")
            self.fields["team"].queryset = offered  # type: ignore[attr-defined]
