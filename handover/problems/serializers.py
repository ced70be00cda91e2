"""API shapes of problems. ``id`` is the public UUID; people by username, teams by name.

What a detail shows of linked handovers, runs and clean-run counts is what the caller may see
(``handover.problems.selectors.problem_view``); the serializers shape it, they do not filter.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from handover.core.fields import NUL, TextField
from handover.handovers.models import Handover
from handover.notifications.models import Team
from handover.ownership.selectors import team_list_assignable
from handover.problems.clean_runs import TargetProgress
from handover.problems.models import MAX_CLEAN_RUNS_REQUIRED, Problem, ProblemEvent
from handover.problems.selectors import ProblemView
from runs.attempts.business_state import run_business_state
from runs.attempts.models import Run

ACTIONS = tuple(Problem.TRANSITIONS)


class TeamField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """A team by its name; null for no owning team. With a ``request`` in the serializer's context, only a
    team its user may name (``team_list_assignable``, as the problem pages offer) or the context's ``problem``'s
    own team: another client's team is not found, as one that does not exist."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="name", queryset=Team.objects.all(), allow_null=True, **kwargs)

    def get_queryset(self) -> Any:
        request = self.context.get("request")
        if request is None:
            return Team.objects.all()
        problem = self.context.get("problem")
        keeping = problem.owning_team_id if isinstance(problem, Problem) else None
        return team_list_assignable(user=request.user, keeping=keeping)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data == "":  # DRF reads "" as null for related fields; the schema asks for a name or null
            self.fail("does_not_exist", slug_name=self.slug_field, value="")
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str) or NUL in data or len(data) > 100:
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data).replace(NUL, "\\x00")[:120])
        return super().to_internal_value(data)


class ProblemRecordListSerializer(serializers.ModelSerializer[Problem]):
    """A problem in a list: its fields, with counts of the linked handovers and runs the caller may see."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    owning_team = serializers.CharField(source="owning_team.name", read_only=True, allow_null=True, default=None)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    handover_count = serializers.SerializerMethodField(help_text="linked handovers the caller may see")
    run_count = serializers.SerializerMethodField(help_text="runs of those handovers the caller may see")

    class Meta:
        model = Problem
        fields = [
            "id",
            "title",
            "status",
            "owning_team",
            "defect_ref",
            "clean_runs_required",
            "fix_deployed_at",
            "verified_at",
            "closed_at",
            "created_by",
            "created_at",
            "handover_count",
            "run_count",
        ]
        read_only_fields = fields

    def _counts(self, problem: Problem) -> dict[str, int]:
        return dict(self.context.get("summaries", {}).get(problem.pk, {"handovers": 0, "runs": 0}))

    def get_handover_count(self, problem: Problem) -> int:
        return self._counts(problem)["handovers"]

    def get_run_count(self, problem: Problem) -> int:
        return self._counts(problem)["runs"]


class ProblemHandoverSerializer(serializers.ModelSerializer[Handover]):
    """A linked handover the caller may see: id, title, status and its runs' tenants."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    tenants = serializers.SerializerMethodField()

    class Meta:
        model = Handover
        fields = ["id", "title", "status", "job", "tenants", "created_at", "closed_at"]
        read_only_fields = fields

    def get_tenants(self, handover: Handover) -> list[str]:
        return sorted({link.run.tenant.slug for link in handover.links.all()})


class ProblemRunSerializer(serializers.ModelSerializer[Run]):
    """A run of a linked handover, or a run since the fix, with its business state beside its status."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    business_state = serializers.SerializerMethodField(help_text="ok, attention, or the technical status")

    class Meta:
        model = Run
        fields = ["id", "job", "tenant", "environment", "window_start", "window_end", "scheduled_for", "status"]
        fields += ["business_state"]
        read_only_fields = fields

    def get_business_state(self, run: Run) -> str:
        shown = getattr(run, "business_state", None)  # set by ``problem_view``
        return (shown or run_business_state(run)).state


class TargetProgressSerializer(serializers.Serializer[TargetProgress]):
    """One linked target's clean runs since the fix was deployed."""

    job = serializers.CharField(source="job.key")
    tenant = serializers.CharField(source="tenant.slug")
    environment = serializers.CharField()
    clean = serializers.IntegerField(help_text="ok runs after the latest bad one, since the fix was deployed")
    pending = serializers.IntegerField(help_text="runs not finished yet (neither counted nor resetting)")
    reset_by = serializers.UUIDField(
        source="reset_by.public_id", allow_null=True, default=None, help_text="the latest bad run, if any"
    )
    runs = serializers.SerializerMethodField()

    def get_runs(self, progress: TargetProgress) -> list[dict[str, Any]]:
        return [
            {"id": str(run.public_id), "status": run.status, "business_state": state} for run, state in progress.runs
        ]


class ProblemEventSerializer(serializers.ModelSerializer[ProblemEvent]):
    actor = serializers.CharField(source="actor.username", read_only=True, allow_null=True, default=None)
    handover = serializers.UUIDField(source="handover.public_id", read_only=True, allow_null=True, default=None)

    class Meta:
        model = ProblemEvent
        fields = ["kind", "summary", "from_status", "to_status", "reason", "actor", "handover", "occurred_at"]
        read_only_fields = fields


class ProblemRecordDetailSerializer(serializers.Serializer[ProblemView]):
    """A problem with what the caller may see of it: handovers, runs, clean-run figures, history.

    ``clean_runs`` is the smallest clean count over the targets the caller sees; ``allowed_actions``
    are the transitions the status allows (the caller's right to take them is ``may_write``).
    """

    id = serializers.UUIDField(source="problem.public_id")
    title = serializers.CharField(source="problem.title")
    status = serializers.ChoiceField(source="problem.status", choices=Problem.Status.choices)
    owning_team = serializers.CharField(source="problem.owning_team.name", allow_null=True, default=None)
    defect_ref = serializers.CharField(source="problem.defect_ref")
    description = serializers.CharField(source="problem.description")
    clean_runs_required = serializers.IntegerField(source="problem.clean_runs_required")
    clean_runs = serializers.IntegerField(source="clean_runs.clean")
    fix_deployed_at = serializers.DateTimeField(source="problem.fix_deployed_at", allow_null=True)
    verified_at = serializers.DateTimeField(source="problem.verified_at", allow_null=True)
    closed_at = serializers.DateTimeField(source="problem.closed_at", allow_null=True)
    created_by = serializers.CharField(source="problem.created_by.username")
    created_at = serializers.DateTimeField(source="problem.created_at")
    may_write = serializers.SerializerMethodField()
    allowed_actions = serializers.SerializerMethodField()
    handovers = ProblemHandoverSerializer(many=True)
    runs = ProblemRunSerializer(many=True)
    targets = TargetProgressSerializer(source="clean_runs.targets", many=True)
    history = ProblemEventSerializer(source="events", many=True)

    def get_may_write(self, view: ProblemView) -> bool:
        return bool(self.context.get("may_write"))

    def get_allowed_actions(self, view: ProblemView) -> list[str]:
        return [a for a, (sources, _) in Problem.TRANSITIONS.items() if view.problem.status in sources]


class ProblemCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    title = TextField(max_length=300)
    defect_ref = TextField(max_length=500, required=False, allow_blank=True, default="")
    description = TextField(max_length=20000, required=False, allow_blank=True, default="")
    owning_team = TeamField(required=False)
    clean_runs_required = serializers.IntegerField(min_value=1, max_value=MAX_CLEAN_RUNS_REQUIRED, required=False)
    handovers = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=100, help_text="handovers to link at once"
    )


class ProblemUpdateInputSerializer(serializers.Serializer[dict[str, Any]]):
    title = TextField(max_length=300, required=False)
    defect_ref = TextField(max_length=500, required=False, allow_blank=True)
    description = TextField(max_length=20000, required=False, allow_blank=True)
    owning_team = TeamField(required=False)
    clean_runs_required = serializers.IntegerField(min_value=1, max_value=MAX_CLEAN_RUNS_REQUIRED, required=False)


class ProblemTransitionInputSerializer(serializers.Serializer[dict[str, Any]]):
    action = serializers.ChoiceField(choices=ACTIONS, help_text="start_fix, deploy_fix, verify, close or reopen")
    reason = TextField(
        max_length=2000,
        required=False,
        allow_blank=True,
        default="",
        help_text="required to reopen, and to close a problem whose fix is not verified",
    )


class ProblemLinkInputSerializer(serializers.Serializer[dict[str, Any]]):
    handover = serializers.UUIDField()
