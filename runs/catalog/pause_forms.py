"""Forms of a job's pause and resume: shape only."""

from __future__ import annotations

from django import forms


class JobPauseForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}), help_text="why it is paused")


class JobResumeForm(forms.Form):
    note = forms.CharField(required=False, max_length=2000)
