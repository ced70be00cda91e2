"""Forms of the alert inbox: shape and per-field rules only."""

from __future__ import annotations

from django import forms


class AlertIgnoreForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"placeholder": "why it needs no action"}))
