"""What each personal API token is for, in its owner's words: ApiTokenLabel, at most one row per token."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("handover", "0003_api_token_use"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiTokenLabel",
            fields=[
                (
                    "token",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="token_label",
                        serialize=False,
                        to=settings.KNOX_TOKEN_MODEL,
                    ),
                ),
                ("label", models.CharField(help_text="what the token is for, chosen by its owner", max_length=100)),
            ],
            options={
                "verbose_name": "API token label",
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("label", ""), _negated=True),
                        name="handover_apitokenlabel_label_set",
                        violation_error_code="required",
                    )
                ],
            },
        ),
    ]
