"""A partial index for the sweep of deliveries a crash left ``received`` (runs.services.delivery_sweep_received)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0006_audit_events"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("outcome", "received")), fields=["received_at"], name="runs_delivery_received_idx"
            ),
        ),
    ]
