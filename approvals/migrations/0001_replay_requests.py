# Replay requests, their scope items, approvals, the one dispatch, webhook deliveries and replay webhooks.

import django.db.models.deletion
import django.utils.timezone
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('handover', '0002_handovers'),
        ('runs', '0004_next_run_checks'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ReplayRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('kind', models.CharField(choices=[('absent_items', 'Selective replay of absent items'), ('rejected_fixed', 'Replay of rejected items after the cause was fixed'), ('whole_batch', 'Reprocessing of a whole batch that was never committed')], max_length=20)),
                ('fix_reference', models.CharField(blank=True, help_text='where the cause of the rejections is recorded as fixed', max_length=500)),
                ('reason', models.TextField()),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('approved', 'Approved'), ('dispatched', 'Dispatched'), ('completed', 'Completed'), ('failed', 'Failed'), ('rejected', 'Rejected'), ('cancelled', 'Cancelled'), ('expired', 'Expired')], default='pending', max_length=20)),
                ('status_changed_at', models.DateTimeField(blank=True, null=True)),
                ('scope_fingerprint', models.CharField(help_text='hex SHA-256 of the exact scope', max_length=64)),
                ('scope_revision', models.PositiveIntegerField(default=1, help_text='1 at creation, +1 per scope change')),
                ('item_count', models.PositiveIntegerField(default=0)),
                ('eligible_approvers', models.JSONField(blank=True, default=dict)),
                ('checks', models.JSONField(blank=True, default=list, help_text='the last evaluation of the preconditions')),
                ('checked_at', models.DateTimeField(blank=True, null=True)),
                ('expires_at', models.DateTimeField(help_text='a request still pending then expires and its approvals are void')),
                ('approved_at', models.DateTimeField(blank=True, null=True)),
                ('dispatched_at', models.DateTimeField(blank=True, null=True)),
                ('closed_at', models.DateTimeField(blank=True, help_text='when it reached a terminal status', null=True)),
                ('close_reason', models.TextField(blank=True)),
                ('notified_at', models.DateTimeField(blank=True, help_text='eligible approvers e-mailed', null=True)),
                ('reminded_at', models.DateTimeField(blank=True, null=True)),
                ('reminder_count', models.PositiveIntegerField(default=0)),
                ('closed_by', models.ForeignKey(blank=True, help_text='the person who cancelled, rejected or settled it; empty when the system closed it', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('handover', models.ForeignKey(blank=True, help_text="the run's open handover when the request was made", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='replay_requests', to='handover.handover')),
                ('requested_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='replay_requests', to='runs.run')),
            ],
        ),
        migrations.CreateModel(
            name='Dispatch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('idempotency_key', models.CharField(max_length=100, unique=True)),
                ('channel', models.CharField(choices=[('webhook', 'Signed webhook'), ('claim', 'Claimed by the runner')], max_length=10)),
                ('status', models.CharField(choices=[('pending', 'Waiting for the runner'), ('leased', 'Leased to the runner'), ('started', 'Replay attempt started'), ('succeeded', 'Replay attempt succeeded'), ('failed', 'Replay attempt failed'), ('unknown', 'Unknown (a person decides)')], default='pending', max_length=20)),
                ('status_changed_at', models.DateTimeField(blank=True, null=True)),
                ('lease_expires_at', models.DateTimeField()),
                ('claimed_at', models.DateTimeField(blank=True, null=True)),
                ('delivered_at', models.DateTimeField(blank=True, help_text='the webhook was answered with 2xx', null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('unknown_at', models.DateTimeField(blank=True, null=True)),
                ('unknown_reason', models.CharField(blank=True, max_length=500)),
                ('payload', models.TextField(blank=True, help_text='the webhook body (JSON), the same bytes on every delivery')),
                ('delivery_count', models.PositiveIntegerField(default=0, help_text='webhook deliveries tried')),
                ('next_delivery_at', models.DateTimeField(blank=True, help_text='when the webhook is due (again); pushed forward while a worker sends', null=True)),
                ('attempt', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='replay_dispatch', to='runs.attempt')),
                ('claimed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='runs.runnercredential')),
                ('dispatched_by', models.ForeignKey(blank=True, help_text='the person whose action released it; empty when the system or the runner did', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('request', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='dispatches', to='approvals.replayrequest')),
            ],
            options={
                'verbose_name_plural': 'dispatches',
            },
        ),
        migrations.CreateModel(
            name='Approval',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('kind', models.CharField(choices=[('business', 'Business'), ('technical', 'Technical')], max_length=20)),
                ('decision', models.CharField(choices=[('approve', 'Approve'), ('reject', 'Reject')], max_length=20)),
                ('comment', models.TextField(blank=True)),
                ('decided_at', models.DateTimeField()),
                ('scope_fingerprint', models.CharField(help_text='the fingerprint of the scope decided on', max_length=64)),
                ('accepts_unknown_repeat_safety', models.BooleanField(default=False)),
                ('acceptance_reason', models.TextField(blank=True)),
                ('voided_at', models.DateTimeField(blank=True, null=True)),
                ('void_reason', models.CharField(blank=True, max_length=300)),
                ('actor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('requester', models.ForeignKey(help_text="the request's requester", on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('request', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='approvals', to='approvals.replayrequest')),
            ],
        ),
        migrations.CreateModel(
            name='ReplayRequestItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('record_id', models.CharField(max_length=300)),
                ('outcome_at_request', models.CharField(help_text="the item's outcome when it entered the scope", max_length=20)),
                ('is_open', models.BooleanField(default=True)),
                ('request', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='approvals.replayrequest')),
                ('work_item', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='replay_items', to='runs.workitem')),
            ],
        ),
        migrations.CreateModel(
            name='ReplayWebhook',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('url', models.URLField(max_length=2000)),
                ('secret_salt', models.CharField(editable=False, max_length=64)),
                ('is_active', models.BooleanField(default=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('job', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='replay_webhook', to='runs.job')),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='WebhookDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField(help_text='1 for the first delivery of the dispatch')),
                ('url', models.URLField(max_length=2000)),
                ('timestamp', models.PositiveBigIntegerField(help_text='the signed X-Handover-Timestamp, Unix seconds')),
                ('status', models.CharField(choices=[('sending', 'Sending'), ('succeeded', 'Succeeded'), ('failed', 'Failed')], default='sending', max_length=20)),
                ('is_transient', models.BooleanField(default=False)),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('response_status', models.PositiveSmallIntegerField(blank=True, null=True)),
                ('response_body', models.TextField(blank=True, help_text='at most 4 KiB of the answer')),
                ('error', models.TextField(blank=True)),
                ('dispatch', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='webhook_deliveries', to='approvals.dispatch')),
            ],
            options={
                'verbose_name_plural': 'webhook deliveries',
            },
        ),
        migrations.AddIndex(
            model_name='replayrequest',
            index=models.Index(fields=['run', '-created_at'], name='approvals_request_run_idx'),
        ),
        migrations.AddIndex(
            model_name='replayrequest',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['expires_at'], name='approvals_request_pending_idx'),
        ),
        migrations.AddIndex(
            model_name='replayrequest',
            index=models.Index(condition=models.Q(('status', 'approved')), fields=['approved_at'], name='approvals_request_approved_idx'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['absent_items', 'rejected_fixed', 'whole_batch'])), name='approvals_replayrequest_kind_valid', violation_error_code='invalid_choice'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'approved', 'dispatched', 'completed', 'failed', 'rejected', 'cancelled', 'expired'])), name='approvals_replayrequest_status_valid', violation_error_code='invalid_choice'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='approvals_replayrequest_reason_set', violation_error_code='required'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind', 'rejected_fixed'), _negated=True), models.Q(('fix_reference', ''), _negated=True), _connector='OR'), name='approvals_replayrequest_fix_reference', violation_error_code='fix_reference_required'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['approved', 'dispatched', 'completed', 'failed']), _negated=True), ('approved_at__isnull', False), _connector='OR'), name='approvals_replayrequest_approved_stamp', violation_error_code='approved_stamp'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['dispatched', 'completed', 'failed']), ('dispatched_at__isnull', False)), models.Q(models.Q(('status__in', ['dispatched', 'completed', 'failed']), _negated=True), ('dispatched_at__isnull', True)), _connector='OR'), name='approvals_replayrequest_dispatched_stamp', violation_error_code='dispatched_stamp'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['completed', 'failed', 'rejected', 'cancelled', 'expired']), ('closed_at__isnull', False)), models.Q(('status__in', ['pending', 'approved', 'dispatched']), ('closed_at__isnull', True)), _connector='OR'), name='approvals_replayrequest_closed_stamp', violation_error_code='closed_stamp'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['cancelled', 'rejected']), _negated=True), models.Q(('closed_by__isnull', False), models.Q(('close_reason', ''), _negated=True)), _connector='OR'), name='approvals_replayrequest_closed_by', violation_error_code='closed_by_required'),
        ),
        migrations.AddConstraint(
            model_name='replayrequest',
            constraint=models.CheckConstraint(condition=models.Q(('expires_at__gt', models.F('created_at'))), name='approvals_replayrequest_expiry_order', violation_error_code='expiry_order'),
        ),
        migrations.AddIndex(
            model_name='dispatch',
            index=models.Index(condition=models.Q(('status__in', ['pending', 'leased'])), fields=['lease_expires_at'], name='approvals_dispatch_lease_idx'),
        ),
        migrations.AddIndex(
            model_name='dispatch',
            index=models.Index(condition=models.Q(('channel', 'webhook'), ('status', 'pending')), fields=['next_delivery_at'], name='approvals_dispatch_due_idx'),
        ),
        migrations.AddConstraint(
            model_name='dispatch',
            constraint=models.UniqueConstraint(fields=('request',), name='approvals_dispatch_one_per_request', violation_error_code='already_dispatched'),
        ),
        migrations.AddConstraint(
            model_name='dispatch',
            constraint=models.CheckConstraint(condition=models.Q(('channel__in', ['webhook', 'claim'])), name='approvals_dispatch_channel_valid', violation_error_code='invalid_choice'),
        ),
        migrations.AddConstraint(
            model_name='dispatch',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'leased', 'started', 'succeeded', 'failed', 'unknown'])), name='approvals_dispatch_status_valid', violation_error_code='invalid_choice'),
        ),
        migrations.AddConstraint(
            model_name='dispatch',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'unknown'), _negated=True), models.Q(('unknown_at__isnull', False), models.Q(('unknown_reason', ''), _negated=True)), _connector='OR'), name='approvals_dispatch_unknown_stamp', violation_error_code='unknown_stamp'),
        ),
        migrations.AddConstraint(
            model_name='dispatch',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['succeeded', 'failed']), _negated=True), ('finished_at__isnull', False), _connector='OR'), name='approvals_dispatch_finished_stamp', violation_error_code='finished_stamp'),
        ),
        migrations.AddConstraint(
            model_name='dispatch',
            constraint=models.CheckConstraint(condition=models.Q(('idempotency_key', ''), _negated=True), name='approvals_dispatch_key_set', violation_error_code='required'),
        ),
        migrations.AddIndex(
            model_name='approval',
            index=models.Index(fields=['request', 'decided_at'], name='approvals_approval_request_idx'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['business', 'technical'])), name='approvals_approval_kind_valid', violation_error_code='invalid_choice'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(('decision__in', ['approve', 'reject'])), name='approvals_approval_decision_valid', violation_error_code='invalid_choice'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.UniqueConstraint(condition=models.Q(('voided_at__isnull', True)), fields=('request', 'kind'), name='approvals_approval_one_per_kind', violation_error_code='already_decided'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.UniqueConstraint(condition=models.Q(('voided_at__isnull', True)), fields=('request', 'actor'), name='approvals_approval_one_per_person', violation_error_code='same_person'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(('actor', models.F('requester')), _negated=True), name='approvals_approval_not_requester', violation_error_code='requester_cannot_approve'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(('accepts_unknown_repeat_safety', False), models.Q(('decision', 'approve'), ('kind', 'technical'), models.Q(('acceptance_reason', ''), _negated=True)), _connector='OR'), name='approvals_approval_acceptance_reasoned', violation_error_code='acceptance_reason_required'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(('voided_at__isnull', True), models.Q(('void_reason', ''), _negated=True), _connector='OR'), name='approvals_approval_void_reason', violation_error_code='void_reason_required'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('decision', 'reject'), _negated=True), models.Q(('comment', ''), _negated=True), _connector='OR'), name='approvals_approval_reject_comment', violation_error_code='comment_required'),
        ),
        migrations.AddIndex(
            model_name='replayrequestitem',
            index=models.Index(fields=['request', 'record_id'], name='approvals_item_request_idx'),
        ),
        migrations.AddConstraint(
            model_name='replayrequestitem',
            constraint=models.UniqueConstraint(fields=('request', 'work_item'), name='approvals_item_unique', violation_error_code='duplicate'),
        ),
        migrations.AddConstraint(
            model_name='replayrequestitem',
            constraint=models.UniqueConstraint(condition=models.Q(('is_open', True)), fields=('work_item',), name='approvals_item_one_open_replay', violation_error_code='open_replay_exists'),
        ),
        migrations.AddConstraint(
            model_name='webhookdelivery',
            constraint=models.UniqueConstraint(fields=('dispatch', 'number'), name='approvals_webhookdelivery_number', violation_error_code='duplicate'),
        ),
        migrations.AddConstraint(
            model_name='webhookdelivery',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['sending', 'succeeded', 'failed'])), name='approvals_webhookdelivery_status_valid', violation_error_code='invalid_choice'),
        ),
        migrations.AddConstraint(
            model_name='webhookdelivery',
            constraint=models.CheckConstraint(condition=models.Q(('status', 'sending'), ('finished_at__isnull', False), _connector='OR'), name='approvals_webhookdelivery_finished', violation_error_code='finished_stamp'),
        ),
    ]
