"""Indexes for the "needs attention" page, which must not slow down as history grows (``bench/history.py``).

Both on the page's order, oldest first by ``COALESCE(scheduled_for, created_at)`` then id, and partial:
- ``runs_run_failing_since_idx``: failed and missed runs (the "failed runs with no handover" section);
- ``runs_run_unresolved_since_idx``: runs with unresolved or possibly duplicated work items (the
  "unresolved for too long" section).
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
        migrations.AddIndex(
            model_name='run',
            index=models.Index(django.db.models.functions.comparison.Coalesce('scheduled_for', 'created_at'), models.F('id'), condition=models.Q(('status__in', ['failed', 'missed'])), name='runs_run_failing_since_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(django.db.models.functions.comparison.Coalesce('scheduled_for', 'created_at'), models.F('id'), condition=models.Q(('unresolved_count__gt', 0), ('possible_duplicate_count__gt', 0), _connector='OR'), name='runs_run_unresolved_since_idx'),
        ),
    ]
