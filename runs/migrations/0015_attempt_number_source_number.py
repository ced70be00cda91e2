"""Data: keep each attempt's reported number as ``source_number`` and renumber ``number`` as Handover's
ordinal on its run (1 + the run's attempts first reported before it), so that ``(run, number)`` can be
unique. Timeline summaries written earlier stay as written. Reverse: restore ``number`` from
``source_number`` where it was kept (an attempt without one keeps its ordinal)."""

from __future__ import annotations

from django.db import migrations


def renumber(apps, schema_editor):  # type: ignore[no-untyped-def]
    Attempt = apps.get_model("runs", "Attempt")
    run_ids = Attempt.objects.values_list("run_id", flat=True).distinct().order_by()
    for run_id in run_ids.iterator():
        attempts = list(Attempt.objects.filter(run_id=run_id).order_by("created_at", "id"))
        for ordinal, attempt in enumerate(attempts, start=1):
            attempt.source_number = attempt.source_number or attempt.number
            attempt.number = ordinal
        Attempt.objects.bulk_update(attempts, ["number", "source_number"])


def restore(apps, schema_editor):  # type: ignore[no-untyped-def]
    Attempt = apps.get_model("runs", "Attempt")
    for attempt in Attempt.objects.filter(source_number__isnull=False).iterator():
        Attempt.objects.filter(pk=attempt.pk).update(number=attempt.source_number)


class Migration(migrations.Migration):
    dependencies = [("runs", "0014_job_slot_settings_attempt_flags_missed_streak")]

    operations = [migrations.RunPython(renumber, restore)]
