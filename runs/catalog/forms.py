"""Forms of the integration pages: keys, custom integrations and their mappings (shape only)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django import forms

from runs.alerts.decoders import DECODERS
from runs.catalog.models import IntegrationKey, Tenant, environment_is_valid

# --- custom integrations (docs/custom-integrations.md) ----------------------------------------------


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
    """Issue another key for an integration (shown once): a header key, or a URL key (the address carries it)."""

    key_kind = forms.ChoiceField(
        choices=IntegrationKey.Kind.choices, initial=IntegrationKey.Kind.HEADER, required=False, label="Kind"
    )


class IntegrationTransportForm(forms.Form):
    """An integration's transport settings: GET ingestion and the body decoder (docs/integrations/transport.md).

    ``based_on``: the values the page showed (``handover.core.edits``)."""

    based_on = forms.CharField(required=False, widget=forms.HiddenInput)

    allow_get = forms.BooleanField(required=False, label="Accept GET reports (status in the query string; URL keys)")
    decoder_kind = forms.ChoiceField(choices=[(d, d) for d in DECODERS], initial="json", label="Body decoder")
    item_types = forms.CharField(
        required=False, max_length=500, label="Envelope item types kept (comma-separated; empty: all)"
    )


class _JsonObjectField(forms.CharField):
    """A JSON object typed into a textarea; the cleaned value stays text (services read it)."""

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        if not text:
            return text
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep for the decoder
            raise forms.ValidationError(f"Not valid JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise forms.ValidationError("Give a JSON object.")
        defaults = document.get("defaults")
        environment = defaults.get("environment") if isinstance(defaults, dict) else None
        if environment is not None and not environment_is_valid(environment):
            raise forms.ValidationError(
                f"defaults.environment {environment!r} is not an environment: use letters, digits, '-' and '_' (1-50)."
            )
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
    """The mapping editor: the mapping, a pasted sample and recent deliveries to try it on; ``based_on``: the
    stored mapping the page showed (``handover.core.edits``)."""

    based_on = forms.CharField(required=False, widget=forms.HiddenInput)

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
