"""Forms of the runs pages: shape and per-field rules only (cross-object rules live in services)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms

from runs.models import Run


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
    q = forms.CharField(required=False, label="Execution or correlation id")


class AlertIgnoreForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"placeholder": "why it needs no action"}))


class NextRunCheckCreateForm(forms.Form):
    """Schedule a check by hand: a target (public id) from the visible ones."""

    target = forms.UUIDField(widget=forms.Select)

    def __init__(self, *args: Any, targets: Iterable[Any] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["target"].widget.choices = [(t.public_id, str(t)) for t in targets]


class NextRunCheckWaiveForm(forms.Form):
    """A waiver: checkpoint date, reason and the named owner's username."""

    checkpoint = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), label="Checkpoint date")
    owner = forms.CharField(max_length=150, label="Owner (username)")
    reason = forms.CharField(max_length=2000, widget=forms.TextInput(attrs={"placeholder": "why not wait"}))


class NextRunCheckConfirmForm(forms.Form):
    """A person's confirmation that a next run without a ledger re-emitted nothing."""

    note = forms.CharField(
        max_length=2000, widget=forms.TextInput(attrs={"placeholder": "how duplicates were checked"})
    )
