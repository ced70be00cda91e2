"""HTML forms of the handover app: shape and per-field rules only (rules across objects live in services)."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from handover.core.people import Person
from handover.handovers.models import Handover

TEXTAREA = {"rows": 5}
SECTION_MAX_LENGTH = 20000  # as the API's input serializer
# the page's edit form: fields whose value a stale tab could write back (compared with their base)
EDIT_FIELD_NAMES = (
    "escalation_owner",
    "customer_update_owner",
    "defect_ref",
    "is_supportability_defect",
    "supportability_ticket",
)


class UsernameField(forms.CharField):
    """A person named by username; cleans to the active user (or None when left empty)."""

    def clean(self, value: Any) -> Person | None:
        name = super().clean(value)
        if not name:
            return None
        user = get_user_model().objects.filter(username=name, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"No active person with the username {name!r}.")
        return user


def base_text(value: Any) -> str:
    """A section's or field's value as the edit form compares it: text with LF line ends; booleans as 0/1."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return ""
    if hasattr(value, "get_username"):
        return str(value.get_username())
    return str(value).replace("\r\n", "\n")


class HandoverEditForm(forms.Form):
    """Every section and field of a handover, plus "confirm as is" for the generated sections."""

    next_action = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs=TEXTAREA),
        label="What is safe to do next",
    )
    definitely_happened = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 8}),
        label="What definitely happened",
    )
    may_have_happened = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 6}),
        label="What may have happened",
    )
    business_impact = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs=TEXTAREA),
        label="Business impact",
        help_text="Specific: who cannot do what, since when — not “platform down”.",
    )
    deadlines = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs=TEXTAREA),
        label="Deadlines and waiting downstream tasks",
    )
    affected = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs=TEXTAREA),
        label="Affected tenants and users",
    )
    expected_output = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs=TEXTAREA),
        label="Expected output and how to verify it",
    )
    recent_changes = forms.CharField(
        required=False,
        max_length=SECTION_MAX_LENGTH,
        widget=forms.Textarea(attrs=TEXTAREA),
        label="Recent deployments or configuration changes",
    )
    confirm = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Confirm generated text as it is",
        choices=Handover.Section.choices,
    )
    escalation_owner = UsernameField(required=False, max_length=150, help_text="username")
    customer_update_owner = UsernameField(required=False, max_length=150, help_text="username")
    defect_ref = forms.CharField(
        required=False, max_length=500, label="Engineering defect", help_text="link to the change or problem ticket"
    )
    is_supportability_defect = forms.BooleanField(
        required=False, label="Supportability defect: the job could not report its own progress accurately"
    )
    supportability_ticket = forms.CharField(required=False, max_length=500, label="Supportability ticket")
    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args: Any, handover: Handover, overrides: dict[str, Any] | None = None, **kwargs: Any) -> None:
        initial = {section: getattr(handover, section) for section in Handover.Section.values}
        initial.update(
            escalation_owner=handover.escalation_owner.get_username() if handover.escalation_owner is not None else "",
            customer_update_owner=(
                handover.customer_update_owner.get_username() if handover.customer_update_owner is not None else ""
            ),
            defect_ref=handover.defect_ref,
            is_supportability_defect=handover.is_supportability_defect,
            supportability_ticket=handover.supportability_ticket,
        )
        # What the person started from: the version and each text as the page showed them, so a
        # save sends only what this person changed (a stale tab never writes back old text).
        initial["version"] = handover.version
        for name in (*Handover.Section.values, *EDIT_FIELD_NAMES):
            initial[f"base_{name}"] = base_text(initial[name])
        initial.update(overrides or {})
        super().__init__(*args, **{**kwargs, "initial": initial})
        for name in (*Handover.Section.values, *EDIT_FIELD_NAMES):
            self.fields[f"base_{name}"] = forms.CharField(required=False, widget=forms.HiddenInput, strip=False)
        if handover.status != Handover.Status.DRAFT:
            # an active handover always says what is safe to do next
            self.fields["next_action"].required = True
        generated = set(handover.generated_sections or [])
        confirm = self.fields["confirm"]
        assert isinstance(confirm, forms.ChoiceField)
        confirm.choices = [(k, v) for k, v in Handover.Section.choices if k in generated]
        self.generated = generated


class HandoverCreateForm(forms.Form):
    """Which failed runs of the job the handover covers (the run it was started from is preselected)."""

    runs = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, label="Runs this handover covers")

    def __init__(self, *args: Any, choices: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        runs = self.fields["runs"]
        assert isinstance(runs, forms.ChoiceField)
        runs.choices = choices


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Say why the handover is reopened."},
    )


class ResidualExceptionForm(forms.Form):
    description = forms.CharField(max_length=5000, widget=forms.Textarea(attrs={"rows": 2}))
    record_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="record ids it covers, separated by commas, spaces or new lines",
    )
    owner = UsernameField(required=False, max_length=150, help_text="username")
    due_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean_record_ids(self) -> list[str]:
        return [part for part in re.split(r"[\s,;]+", self.cleaned_data.get("record_ids") or "") if part]


class ResidualExceptionOwnerForm(forms.Form):
    owner = UsernameField(required=False, max_length=150, help_text="username")
    due_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput, help_text="the exception's version shown")
