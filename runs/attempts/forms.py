"""The runs list's filter form: shape and per-field rules only."""

from __future__ import annotations

from datetime import datetime

from django import forms

from runs.attempts.models import Run


class RunFilterForm(forms.Form):
    """The runs list filters; every field optional."""

    tenant = forms.CharField(required=False, label="Tenant")
    job = forms.CharField(required=False, label="Job")
    environment = forms.CharField(required=False, label="Environment")
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Run.Status.choices])
    window_from = forms.DateTimeField(
        required=False, label="Window from", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    window_to = forms.DateTimeField(
        required=False, label="Window to", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    q = forms.CharField(required=False, label="Search", help_text="start of a job, tenant, execution id or reference")


class DuplicateTriggerExplainForm(forms.Form):
    """Why a second trigger of the slot happened, and where the evidence is."""

    reason = forms.CharField(max_length=2000, label="Why it happened")
    evidence_ref = forms.CharField(max_length=300, label="Evidence (ticket, log link)")


class AttemptReplaceSlotForm(forms.Form):
    """Another fire time of the target's schedule (offered as choices, ISO 8601 UTC) and why."""

    slot = forms.ChoiceField(label="Move to the slot")
    reason = forms.CharField(max_length=2000, label="Why")

    def __init__(self, *args: object, slots: list[tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["slot"].choices = slots  # type: ignore[attr-defined]

    def clean_slot(self) -> datetime:
        return datetime.fromisoformat(self.cleaned_data["slot"])
