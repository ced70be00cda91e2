"""Indexes for list pages that must not slow down as history grows (``bench/history.py``).

- ``runs_alert_inbox_cover_idx`` replaces ``runs_alert_inbox_idx`` (same keys: outcome, newest first)
  and carries the alert's id, run, tenant slug and original (``INCLUDE``, PostgreSQL; SQLite builds the
  plain index): the inbox's capped counts decide who sees an alert from the index alone.
- ``runs_alert_unlinked_idx``: alerts without a run by outcome and tenant slug (the inbox's counts of
  a support person's unlinked alerts).
- ``runs_run_run_at_idx`` on the run time, ``COALESCE(scheduled_for, window_end)``: the failed runs of a
  period (the recurrence page, failure trends) without reading every run.
- ``runs_attempt_dup_unexpl_idx`` and ``runs_event_flagged_idx``: the few attempts and timeline events
  the business state asks about (unexplained duplicate triggers, re-fires, conflicting reports), so the
  runs lists never read every attempt or event, however PostgreSQL evaluates those ``EXISTS``.
- ``runs_delivery_refused_idx``: the inbox's rejected and failed posts (their counts and newest 20).
- ``runs_attempt_failed_idx``: attempts that ended failed (a period's failed runs on the recurrence
  page: PostgreSQL hashes them for the runs of the period; from this index, not from every attempt).
- ``runs_run_failing_idx``: failed and missed runs (the navigation's capped "needs attention" count).
"""

import django.db.models.functions.comparison
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0028_workitem_drop_record_idx'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='alert',
            name='runs_alert_inbox_idx',
        ),
        migrations.AddIndex(
            model_name='alert',
            index=models.Index(fields=['outcome', '-created_at'], include=('id', 'run', 'tenant_slug', 'duplicate_of'), name='runs_alert_inbox_cover_idx'),
        ),
        migrations.AddIndex(
            model_name='alert',
            index=models.Index(condition=models.Q(('run__isnull', True)), fields=['outcome', 'tenant_slug'], include=('id', 'duplicate_of'), name='runs_alert_unlinked_idx'),
        ),
        migrations.AddIndex(
            model_name='attempt',
            index=models.Index(condition=models.Q(('duplicate_explained_at__isnull', True), ('is_duplicate_trigger', True)), fields=['run'], name='runs_attempt_dup_unexpl_idx'),
        ),
        migrations.AddIndex(
            model_name='attempt',
            index=models.Index(condition=models.Q(('status__in', ['failed', 'timed_out', 'cancelled', 'abandoned'])), fields=['run'], name='runs_attempt_failed_idx'),
        ),
        migrations.AddIndex(
            model_name='delivery',
            index=models.Index(condition=models.Q(('outcome__in', ['rejected', 'failed'])), fields=['outcome', '-received_at'], name='runs_delivery_refused_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(django.db.models.functions.comparison.Coalesce('scheduled_for', 'window_end'), name='runs_run_run_at_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('status__in', ['failed', 'missed'])), fields=['id'], name='runs_run_failing_idx'),
        ),
        migrations.AddIndex(
            model_name='timelineevent',
            index=models.Index(condition=models.Q(('kind__in', ['refire', 'conflicting_report'])), fields=['run', 'recorded_at'], name='runs_event_flagged_idx'),
        ),
    ]
