"""HTML views of the handover app and the shared ones, split by page group and re-exported here."""

from __future__ import annotations

from handover.views.attention import attention_view
from handover.views.common import PreferenceForm, healthz, preferences
from handover.views.handovers import (
    handover_action_view,
    handover_detail_view,
    handover_edit_view,
    handover_history_view,
    handover_list_view,
    handover_markdown_view,
    handover_mine_view,
    handover_new_view,
    handover_print_view,
    residual_exception_add_view,
    residual_exception_edit_view,
    run_handover_box_view,
)
from handover.views.jobs import job_pause_view, job_resume_view
from handover.views.tokens import api_token_create_view, api_token_list_view, api_token_revoke_view

__all__ = [
    "PreferenceForm",
    "api_token_create_view",
    "api_token_list_view",
    "api_token_revoke_view",
    "attention_view",
    "handover_action_view",
    "handover_detail_view",
    "handover_edit_view",
    "handover_history_view",
    "handover_list_view",
    "handover_markdown_view",
    "handover_mine_view",
    "handover_new_view",
    "handover_print_view",
    "healthz",
    "job_pause_view",
    "job_resume_view",
    "preferences",
    "residual_exception_add_view",
    "residual_exception_edit_view",
    "run_handover_box_view",
]
