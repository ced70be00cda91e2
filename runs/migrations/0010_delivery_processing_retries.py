"""Deliveries whose processing fails are retried with backoff, then stored ``failed``: the outcome, the
try count, the last error and the next try time (rule 9 in docs/architecture.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0009_audit_api_token_actions"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="delivery",
            name="runs_delivery_outcome_valid",
        ),
        migrations.AlterField(
            model_name="delivery",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("received", "Received (not parsed yet)"),
                    ("processed", "Processed"),
                    ("rejected", "Rejected"),
                    ("failed", "Failed (its processing kept failing)"),
                ],
                default="received",
                max_length=20,
            ),
        ),
        migrations.AddConstraint(
            model_name="delivery",
            constraint=models.CheckConstraint(
                condition=models.Q(("outcome__in", ["received", "processed", "rejected", "failed"])),
                name="runs_delivery_outcome_valid",
                violation_error_code="invalid_choice",
            ),
        ),
        migrations.AddField(
            model_name="delivery",
            name="try_count",
            field=models.PositiveSmallIntegerField(
                default=0, help_text="how often processing failed (the request, then the sweep's retries)"
            ),
        ),
        migrations.AddField(
            model_name="delivery",
            name="next_try_at",
            field=models.DateTimeField(
                blank=True,
                help_text="when the sweep tries a failed processing again (UTC); empty: not waiting",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="delivery",
            name="last_error",
            field=models.TextField(blank=True, help_text="the last processing error, redacted"),
        ),
    ]
