"""The Heartbeat table: one row per periodic process, upserted each tick (the beat's, read by /healthz)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_delivery_received_idx"),
    ]

    operations = [
        migrations.CreateModel(
            name="Heartbeat",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(help_text="the process that ticks, e.g. 'beat'", max_length=50)),
                ("beat_at", models.DateTimeField(help_text="when it last ticked (UTC)")),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("name",), name="runs_heartbeat_name_unique", violation_error_code="duplicate_heartbeat"
                    )
                ],
            },
        ),
    ]
