"""Forms of the work ledger: shape and per-field rules only (cross-object rules live in services)."""

from __future__ import annotations

from typing import Any

from django import forms

from runs.attempts.models import Run
from runs.ledger.models import WorkItem, WorkItemLoad

# --- work ledger ------------------------------------------------------------------------------------


class WorkItemLoadForm(forms.Form):
    """An upload of record-id files for a run: one file per kind (at least one), loaded together."""

    population = forms.FileField(required=False, label="Eligible population")
    runner_report = forms.FileField(required=False, label="Runner report")
    destination = forms.FileField(required=False, label="Destination export")
    provider_lookup = forms.FileField(required=False, label="Provider lookup (bulk verify)")
    id_column = forms.CharField(max_length=200, initial="record_id", required=False, label="Id column (by name)")
    file_format = forms.ChoiceField(choices=WorkItemLoad.Format.choices, initial="auto", required=False, label="Format")
    destination_id_column = forms.CharField(
        max_length=200, required=False, label="Id column of the destination export, if named otherwise"
    )
    ref_column = forms.CharField(max_length=200, required=False, label="Reference column")
    status_column = forms.CharField(max_length=200, required=False, label="Status column")
    skip_column = forms.CharField(max_length=200, required=False, label="Skip-reason column")
    found_column = forms.CharField(max_length=200, required=False, label="Found column")
    is_destination_complete = forms.BooleanField(
        required=False, label="The destination export is complete for the window (missing means absent)"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not any(data.get(kind) for kind in WorkItemLoad.Kind.values):
            raise forms.ValidationError("Choose at least one file.")
        return data


class WorkItemChangeForm(forms.Form):
    """A person's change of one item's outcome, with the reason."""

    record_id = forms.CharField(max_length=300)
    outcome = forms.ChoiceField(choices=WorkItem.Outcome.choices)
    note = forms.CharField(max_length=2000, widget=forms.TextInput(attrs={"placeholder": "why (required)"}))
    evidence_ref = forms.CharField(max_length=300, required=False, label="Reference")


class WorkItemVerifyForm(forms.Form):
    """A provider lookup's result for one uncertain item."""

    record_id = forms.CharField(max_length=300)
    found = forms.TypedChoiceField(
        choices=[("yes", "found"), ("no", "confirmed not found")], coerce=lambda v: v == "yes", empty_value=None
    )
    reference = forms.CharField(max_length=300, required=False)
    note = forms.CharField(max_length=2000, required=False)


class WorkItemLoadConfirmForm(forms.Form):
    """A person's confirmation of a load's weakenings, against the ledger version the preview showed."""

    reason = forms.CharField(max_length=2000)
    ledger_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)


class WorkItemLoadDiscardForm(forms.Form):
    """Why a waiting load is not applied."""

    reason = forms.CharField(max_length=2000)


class WorkItemDuplicateExplainForm(forms.Form):
    """A person's explanation of one possible duplicate."""

    record_id = forms.CharField(max_length=300)
    reason = forms.CharField(max_length=2000)
    evidence_ref = forms.CharField(max_length=300)


class RunFailureClassForm(forms.Form):
    """A person's confirmation of the run's failure class."""

    failure_class = forms.ChoiceField(choices=Run.FailureClass.choices)
    note = forms.CharField(
        max_length=2000,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "optional", "size": 24}),
    )


class WorkItemSearchForm(forms.Form):
    record_id = forms.CharField(max_length=300, label="Record id")
