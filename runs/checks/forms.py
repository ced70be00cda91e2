"""Forms of next-run checks: shape and per-field rules only (cross-object rules live in services)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms


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
