"""When each personal API token (django-rest-knox) was last used: ApiTokenUse, one row per token."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('handover', '0002_handovers'),
        ('knox', '0009_extend_authtoken_field'),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiTokenUse',
            fields=[
                ('token', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='use', serialize=False, to=settings.KNOX_TOKEN_MODEL)),
                ('last_used_at', models.DateTimeField(help_text='UTC; accurate to a minute (written at most once a minute)')),
            ],
            options={
                'verbose_name': 'API token use',
            },
        ),
    ]
