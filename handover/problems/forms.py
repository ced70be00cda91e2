"""HTML forms of problems: shape and per-field rules only (who may, and the state rules, live in services)."""

from __future__ import annotations

from typing import Any

from django import forms

from handover.core.people import Viewer
from handover.notifications.models import Team
from handover.ownership.selectors import team_list_assignable
from handover.problems.models import DEFAULT_CLEAN_RUNS_REQUIRED, MAX_CLEAN_RUNS_REQUIRED, Problem
from handover.problems.services import problem_edit_text


class ProblemForm(forms.Form):
    """A problem's own fields (new and edit); the owning team is one ``user`` may see, or ``current_team_id``
    (the problem's own, so an edit keeps it)."""

    title = forms.CharField(max_length=300)
    defect_ref = forms.CharField(
        max_length=500, required=False, label="Defect reference", help_text="a ticket URL or key, e.g. PRB-2041"
    )
    description = forms.CharField(max_length=20000, required=False, widget=forms.Textarea(attrs={"rows": 4}))
    owning_team = forms.ModelChoiceField(
        queryset=Team.objects.order_by("name"), required=False, empty_label="— no team —", label="Owning team"
    )
    clean_runs_required = forms.IntegerField(
        min_value=1,
        max_value=MAX_CLEAN_RUNS_REQUIRED,
        initial=DEFAULT_CLEAN_RUNS_REQUIRED,
        label="Clean runs required",
        help_text="clean runs of every linked target after the fix is deployed before it counts as verified",
    )

    def __init__(self, *args: Any, user: Viewer, current_team_id: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        offered = team_list_assignable(user=user, keeping=current_team_id).order_by("name")
        self.fields["owning_team"].queryset = offered  # type: ignore[attr-defined]


EDIT_FIELDS = ("title", "defect_ref", "description", "owning_team", "clean_runs_required")


class ProblemEditForm(ProblemForm):
    """The problem page's edit form: the fields, and hidden, the values the person started from
    (``base_<name>``), so a save changes only what the person changed (never reverts another's edit)."""

    def __init__(self, *args: Any, problem: Problem, **kwargs: Any) -> None:
        kwargs["current_team_id"] = problem.owning_team_id
        if not args:  # the form shown: the problem's values, and them again as the base
            kwargs["initial"] = {
                **{name: getattr(problem, name) for name in EDIT_FIELDS if name != "owning_team"},
                "owning_team": problem.owning_team_id,
                **{f"base_{name}": problem_edit_text(name, getattr(problem, name)) for name in EDIT_FIELDS},
            }
        super().__init__(*args, **kwargs)
        for name in EDIT_FIELDS:
            self.fields[f"base_{name}"] = forms.CharField(required=False, widget=forms.HiddenInput, strip=False)


class ProblemTransitionForm(forms.Form):
    """One move of the problem, with the reason some moves need."""

    action = forms.ChoiceField(choices=[(a, a) for a in Problem.TRANSITIONS])
    reason = forms.CharField(max_length=2000, required=False)


class ProblemLinkForm(forms.Form):
    """A handover to link to or unlink from a problem, by its id."""

    handover = forms.UUIDField()


class ProblemChoiceForm(forms.Form):
    """From a handover's page: a problem to link it to, by its id."""

    problem = forms.UUIDField()
