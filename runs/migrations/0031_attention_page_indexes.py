"""Indexes for the "needs attention" page and the aged work, which must not slow down as history grows
(``bench/history.py``).

Each on a list's order (oldest first by when, then id), partial:
- ``runs_run_failing_since_idx``: failed and missed runs by ``COALESCE(scheduled_for, created_at)`` (the
  "failed runs with no handover" section);
- ``runs_run_failing_aged_idx``: failed and missed runs by ``COALESCE(status_changed_at, scheduled_for,
  created_at)`` (aged work). It replaces ``runs_run_failing_idx`` (the same rows by id), whose one reader,
  the navigation's capped count of failed runs without a handover, reads either partial index;
- ``runs_run_unresolved_since_idx``: runs with unresolved or possibly duplicated work items by
  ``COALESCE(scheduled_for, created_at)`` (the "unresolved for too long" section; aged work's runs with
  unresolved items read it too).
"""

import django.db.models.functions.comparison
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0030_fk_indexes_covered_by_composites'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='run',
            name='runs_run_failing_idx',
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(django.db.models.functions.comparison.Coalesce('status_changed_at', 'scheduled_for', 'created_at'), models.F('id'), condition=models.Q(('status__in', ['failed', 'missed'])), name='runs_run_failing_aged_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(django.db.models.functions.comparison.Coalesce('scheduled_for', 'created_at'), models.F('id'), condition=models.Q(('status__in', ['failed', 'missed'])), name='runs_run_failing_since_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(django.db.models.functions.comparison.Coalesce('scheduled_for', 'created_at'), models.F('id'), condition=models.Q(('unresolved_count__gt', 0), ('possible_duplicate_count__gt', 0), _connector='OR'), name='runs_run_unresolved_since_idx'),
        ),
    ]
