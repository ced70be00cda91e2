"""Teams get a public id (their pages' URLs): added nullable, filled per row, then made unique."""

import uuid

from django.db import migrations, models


def fill_public_ids(apps, schema_editor):
    Team = apps.get_model("handover", "Team")
    for team in Team.objects.filter(public_id__isnull=True):
        team.public_id = uuid.uuid4()
        team.save(update_fields=["public_id"])


class Migration(migrations.Migration):

    dependencies = [
        ('handover', '0006_notifications_teams_apprise_targets'),
    ]

    operations = [
        migrations.AddField(model_name="team", name="public_id", field=models.UUIDField(null=True, editable=False)),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="team",
            name="public_id",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
