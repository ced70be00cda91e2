"""Forms of the runs pages: shape and per-field rules only (cross-object rules live in services)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django import forms

from runs.models.core import Run, Tenant
from runs.models.ledger import WorkItem, WorkItemLoad


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


class RunFailureClassForm(forms.Form):
    """A person's confirmation of the run's failure class."""

    failure_class = forms.ChoiceField(choices=Run.FailureClass.choices)
    note = forms.CharField(
        max_length=2000, required=False, widget=forms.TextInput(attrs={"placeholder": "why, if not the suggestion"})
    )


class WorkItemSearchForm(forms.Form):
    record_id = forms.CharField(max_length=300, label="Record id")


# --- custom integrations (issue 9) ----------------------------------------------------------------


class _KeyFields(forms.Form):
    """Who a new integration key may write for: some tenants, or (an explicit choice) all of them."""

    key_tenants = forms.ModelMultipleChoiceField(
        queryset=Tenant.objects.order_by("slug"),
        required=False,
        to_field_name="slug",
        label="Tenants the key may write to",
        widget=forms.SelectMultiple(attrs={"size": 6}),
    )
    key_all_tenants = forms.BooleanField(required=False, label="All tenants (explicit choice)")
    key_label = forms.CharField(max_length=100, required=False, label="Key label")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("key_tenants") and not data.get("key_all_tenants"):
            self.add_error("key_tenants", "Bind the key to at least one tenant, or choose all tenants explicitly.")
        return data


class IntegrationKeyCreateForm(_KeyFields):
    """Issue another key for an integration (shown once)."""


class _JsonObjectField(forms.CharField):
    """A JSON object typed into a textarea; the cleaned value stays text (services read it)."""

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        if not text:
            return text
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise forms.ValidationError("Give a JSON object.")
        return text


class IntegrationCustomCreateForm(_KeyFields):
    """A custom integration: a name, its mapping (JSON), and its first key."""

    name = forms.CharField(max_length=100)
    mapping = _JsonObjectField(
        widget=forms.Textarea(attrs={"rows": 22, "class": "mono", "spellcheck": "false"}),
        help_text="JMESPath expressions per field; see the mapping reference below.",
    )
    sample = forms.CharField(
        required=False,
        max_length=1024 * 1024,
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono", "spellcheck": "false"}),
        help_text="Optional: a payload the mapping must map before the integration is created.",
    )


class IntegrationMappingForm(forms.Form):
    """The mapping editor: the mapping, a pasted sample and recent deliveries to try it on."""

    mapping = forms.CharField(widget=forms.Textarea(attrs={"rows": 24, "class": "mono", "spellcheck": "false"}))
    sample = forms.CharField(
        required=False,
        max_length=1024 * 1024,
        widget=forms.Textarea(attrs={"rows": 10, "class": "mono", "spellcheck": "false"}),
        label="Pasted sample",
    )
    deliveries = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Recent deliveries"
    )
    action = forms.ChoiceField(choices=[("preview", "Try"), ("save", "Save")], required=False)

    def __init__(self, *args: Any, delivery_choices: Iterable[tuple[str, str]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["deliveries"].choices = list(delivery_choices)  # type: ignore[attr-defined]
