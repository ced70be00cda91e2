"""What was mended so the database could hold an alert's record, noted on the alert (rule 9 in
docs/architecture.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_delivery_processing_retries"),
    ]

    operations = [
        migrations.AddField(
            model_name="alert",
            name="mend_notes",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="what was mended so the database could hold the record (a list of sentences)",
            ),
        ),
    ]
