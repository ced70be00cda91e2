"""Timeline and alert kinds become enumerations with a CheckConstraint each.

Before the constraints are added, any stored kind outside the enumerations is listed and the migration
stops: the timeline is append-only (docs/architecture.md "Adding a timeline kind"), so an unknown kind is
added as a member, never rewritten. On PostgreSQL each constraint is added ``NOT VALID`` (a brief lock,
no scan) and validated in its own transaction (a scan that lets writers carry on); the migration is
therefore not atomic as a whole, and each step is.
"""

from __future__ import annotations

from django.db import migrations, models, transaction

# The members as of this migration (historical values: a migration imports no app code).
TIMELINE_EVENT_KINDS = (
    "acknowledged",
    "attempt_abandoned",
    "attempt_cancelled",
    "attempt_details_changed",
    "attempt_failed",
    "attempt_queued",
    "attempt_replaced",
    "attempt_running",
    "attempt_succeeded",
    "attempt_timed_out",
    "conflicting_report",
    "definition_mismatch",
    "duplicate_trigger",
    "duplicate_trigger_explained",
    "failure_class_confirmed",
    "failure_class_suggested",
    "handover_closed",
    "handover_created",
    "handover_edited",
    "handover_handed_over",
    "handover_recovering",
    "handover_regenerated",
    "handover_reopened",
    "handover_resolved",
    "handover_verifying",
    "job_paused",
    "job_resumed",
    "manual_replay_unapproved",
    "missed_streak_closed",
    "missed_streak_opened",
    "next_run_check_awaiting_confirmation",
    "next_run_check_confirmed",
    "next_run_check_failed",
    "next_run_check_late_success",
    "next_run_check_moved",
    "next_run_check_passed",
    "next_run_check_scheduled",
    "next_run_check_waived",
    "overlap_breach",
    "overlap_detected",
    "recovery_decision",
    "refire",
    "refire_explained",
    "replay_approval",
    "replay_approved",
    "replay_attempt_failed",
    "replay_attempt_linked",
    "replay_attempt_started",
    "replay_attempt_succeeded",
    "replay_attempt_timed_out",
    "replay_cancelled",
    "replay_claimed",
    "replay_completed",
    "replay_dispatch_blocked",
    "replay_dispatch_unknown",
    "replay_dispatched",
    "replay_expired",
    "replay_failed",
    "replay_refused",
    "replay_rejected",
    "replay_requested",
    "replay_rescoped",
    "replay_webhook_delivered",
    "residual_exception_added",
    "residual_exception_changed",
    "resolved",
    "retention_purged",
    "retries_exhausted",
    "run_missed",
    "run_reported",
    "schedule_mismatch",
    "second_scheduler_suspected",
    "source_number_repeated",
    "work_item_changed",
    "work_item_duplicate_explained",
    "work_item_verified",
    "work_items_load_awaiting_confirmation",
    "work_items_load_discarded",
    "work_items_loaded",
    "work_items_verified",
)
ALERT_KINDS = (
    "attempt",
    "run",
    "resolve",
    "acknowledge",
    "definition",
)


def _labelled(values: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(value, value.replace("_", " ").capitalize()) for value in values]


def refuse_unknown_kinds(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    """Stop with the list of stored kinds outside the enumerations (nothing is changed)."""
    unknown = []
    for model_name, allowed in (("TimelineEvent", TIMELINE_EVENT_KINDS), ("Alert", ALERT_KINDS)):
        model = apps.get_model("runs", model_name)
        rows = (
            model.objects.using(schema_editor.connection.alias)
            .exclude(kind__in=allowed)
            .values_list("kind")
            .annotate(count=models.Count("pk"))
            .order_by("kind")
        )
        unknown += [f"{model_name}.kind {kind!r}: {count} row(s)" for kind, count in rows]
    if unknown:
        raise RuntimeError(
            "Stored kinds outside the enumerations; the timeline cannot be updated, so add each as a member "
            "(TimelineEvent.Kind or Alert.Kind) and make a migration that includes it, then migrate again:\n  "
            + "\n  ".join(unknown)
        )


class AddCheckNotValidThenValidate(migrations.AddConstraint):
    """AddConstraint; on PostgreSQL ``ADD CONSTRAINT ... NOT VALID`` then ``VALIDATE CONSTRAINT``, each committed."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # noqa: ANN001, ANN201
        connection = schema_editor.connection
        model = to_state.apps.get_model(app_label, self.model_name)
        if connection.vendor != "postgresql":
            with transaction.atomic(using=connection.alias):
                super().database_forwards(app_label, schema_editor, from_state, to_state)
            return
        table = schema_editor.quote_name(model._meta.db_table)
        name = schema_editor.quote_name(self.constraint.name)
        with transaction.atomic(using=connection.alias):
            schema_editor.execute(str(self.constraint.create_sql(model, schema_editor)) + " NOT VALID", params=None)
        with transaction.atomic(using=connection.alias):
            schema_editor.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}", params=None)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("runs", "0019_integration_transport_refusals_attempt_cancelled")]

    operations = [
        migrations.RunPython(refuse_unknown_kinds, migrations.RunPython.noop, atomic=True),
        migrations.AlterField(
            model_name="alert",
            name="kind",
            field=models.CharField(choices=_labelled(ALERT_KINDS), default="attempt", max_length=20),
        ),
        migrations.AlterField(
            model_name="timelineevent",
            name="kind",
            field=models.CharField(choices=_labelled(TIMELINE_EVENT_KINDS), max_length=60),
        ),
        AddCheckNotValidThenValidate(
            model_name="alert",
            constraint=models.CheckConstraint(
                condition=models.Q(kind__in=list(ALERT_KINDS)),
                name="runs_alert_kind_valid",
                violation_error_code="invalid_choice",
            ),
        ),
        AddCheckNotValidThenValidate(
            model_name="timelineevent",
            constraint=models.CheckConstraint(
                condition=models.Q(kind__in=list(TIMELINE_EVENT_KINDS)),
                name="runs_timelineevent_kind_valid",
                violation_error_code="invalid_choice",
            ),
        ),
    ]
