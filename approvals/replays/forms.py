"""HTML forms of the approvals app: shape and per-field rules only (the replay rules live in services)."""

from __future__ import annotations

from typing import Any

from django import forms

from approvals.replays.models import Approval, ReplayRequest
from approvals.replays.requests import RECOVERY_DECISIONS


class ReplayRequestCreateForm(forms.Form):
    """Request a replay from the run's ledger: some of the listed items, or all of the kind."""

    kind = forms.ChoiceField(choices=ReplayRequest.Kind.choices)
    record_ids = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    all_items = forms.BooleanField(required=False, label="All items of this kind")
    fix_reference = forms.CharField(
        required=False, max_length=500, label="Fix reference", help_text="where the cause of the rejections is fixed"
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=4000)

    def __init__(self, *args: Any, candidates: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["record_ids"].choices = [(r, r) for r in candidates or []]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind != ReplayRequest.Kind.WHOLE_BATCH and not data.get("all_items") and not data.get("record_ids"):
            raise forms.ValidationError("Select the items to replay, or all of them.")
        return data


class DecisionForm(forms.Form):
    """Approve or reject: the kind, the scope reviewed, a comment and (unless re-entered lately) the password."""

    kind = forms.ChoiceField(choices=Approval.Kind.choices)
    scope_fingerprint = forms.CharField(widget=forms.HiddenInput, max_length=64)
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=4000)
    password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="needed unless you re-entered it in the last five minutes",
    )
    accepts_unknown_repeat_safety = forms.BooleanField(
        required=False, label="I accept that the job's repeat safety is unknown"
    )
    acceptance_reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=4000)

    def __init__(self, *args: Any, kinds: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kinds is not None:
            self.fields["kind"].choices = [(k, label) for k, label in Approval.Kind.choices if k in kinds]  # type: ignore[attr-defined]


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=2000)


class SettleForm(forms.Form):
    """A person's decision on an unknown dispatch: no outcome is preselected, and it must be confirmed."""

    outcome = forms.ChoiceField(
        choices=[
            ("", "— choose what you found —"),
            ("failed", "Failed (release the items)"),
            ("completed", "Completed"),
        ]
    )
    reason = forms.CharField(max_length=2000, label="What you found")
    confirm = forms.BooleanField(
        required=True, label="I checked the destination: this settles the replay for good (it cannot be undone)"
    )


class RecoveryDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=list(RECOVERY_DECISIONS.items()))
    reference = forms.CharField(required=False, max_length=300, help_text="the retry's execution id or reference")
    note = forms.CharField(required=False, max_length=2000)
