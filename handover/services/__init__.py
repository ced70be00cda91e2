"""Every write of the handover app (STYLE.md §2), split by sub-domain and re-exported here."""

from __future__ import annotations

from handover.services.checks import (
    handover_checks_schedule,
    handover_escalation_owners_for_check,
    handover_reopen_for_failed_check,
    handover_resolve_if_settled,
    handover_sweep_verifying,
)
from handover.services.closing import (
    ClosingCondition,
    handover_checks_settled,
    handover_closing_conditions,
    handover_closing_missing,
)
from handover.services.handovers import (
    EDITABLE_FIELDS,
    handover_close,
    handover_create,
    handover_event_record,
    handover_hand_over,
    handover_refresh_generated,
    handover_reopen,
    handover_resolve,
    handover_start_recovery,
    handover_transition,
    handover_update,
    handover_verify,
    residual_exception_create,
    residual_exception_update,
)
from handover.services.notifications import (
    handover_notification_fail,
    handover_notification_send,
    handover_notifications_create,
)
from handover.services.preferences import user_preference_set
from handover.services.prefill import GENERATED_SECTIONS, handover_prefill, handover_title

__all__ = [
    "EDITABLE_FIELDS",
    "GENERATED_SECTIONS",
    "ClosingCondition",
    "handover_checks_schedule",
    "handover_checks_settled",
    "handover_close",
    "handover_closing_conditions",
    "handover_closing_missing",
    "handover_create",
    "handover_escalation_owners_for_check",
    "handover_event_record",
    "handover_hand_over",
    "handover_notification_fail",
    "handover_notification_send",
    "handover_notifications_create",
    "handover_prefill",
    "handover_refresh_generated",
    "handover_reopen",
    "handover_reopen_for_failed_check",
    "handover_resolve",
    "handover_resolve_if_settled",
    "handover_start_recovery",
    "handover_sweep_verifying",
    "handover_title",
    "handover_transition",
    "handover_update",
    "handover_verify",
    "residual_exception_create",
    "residual_exception_update",
    "user_preference_set",
]
