"""HTML routes of the handover app (names ``handover:<entity>-<action>``).

``handover/urls.py`` is the project's root URLconf and includes these; this module holds only the
handover app's own pages.
"""

from __future__ import annotations

from django.urls import path

from handover.accounts.views import api_token_create_view, api_token_list_view, api_token_revoke_view
from handover.handovers.attention_views import attention_view
from handover.handovers.views import (
    handover_action_view,
    handover_detail_view,
    handover_edit_view,
    handover_generated_diff_view,
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
from handover.notifications.views import (
    notification_list_view,
    notification_read_view,
    profile_email_verify_view,
    profile_email_view,
    profile_preferences_view,
    profile_target_add_view,
    profile_target_delete_view,
    profile_target_test_view,
    profile_time_zone_view,
    profile_view,
)
from handover.ownership.views import aged_work_mine_view, job_ownership_view, team_detail_view
from handover.problems.views import (
    handover_problem_link_view,
    problem_detail_view,
    problem_edit_view,
    problem_export_view,
    problem_list_view,
    problem_markdown_view,
    problem_new_view,
    problem_transition_view,
    problem_unlink_view,
)
from runs.catalog.pause_views import job_pause_view, job_resume_view, target_pause_view, target_resume_view

app_name = "handover"
urlpatterns = [
    path("handovers/", handover_list_view, name="handover-list"),
    path("handovers/mine/", handover_mine_view, name="handover-mine"),
    path("handovers/attention/", attention_view, name="attention"),
    path("handovers/new/", handover_new_view, name="handover-new"),
    path("handovers/<uuid:id>/", handover_detail_view, name="handover-detail"),
    path("handovers/<uuid:id>/edit/", handover_edit_view, name="handover-edit"),
    path("handovers/<uuid:id>/print/", handover_print_view, name="handover-print"),
    path("handovers/<uuid:id>/markdown/", handover_markdown_view, name="handover-markdown"),
    path("handovers/<uuid:id>/history/", handover_history_view, name="handover-history"),
    path("handovers/<uuid:id>/generated-diff/", handover_generated_diff_view, name="handover-generated-diff"),
    path("handovers/<uuid:id>/exceptions/", residual_exception_add_view, name="residual-exception-add"),
    path(
        "handovers/<uuid:id>/exceptions/<uuid:exception_id>/",
        residual_exception_edit_view,
        name="residual-exception-edit",
    ),
    path("handovers/<uuid:id>/problems/", handover_problem_link_view, name="handover-problem-link"),
    path("handovers/<uuid:id>/<slug:action>/", handover_action_view, name="handover-action"),
    # problems: the systemic cause behind handovers (docs/problems.md)
    path("problems/", problem_list_view, name="problem-list"),
    path("problems/export.csv", problem_export_view, name="problem-export"),
    path("problems/new/", problem_new_view, name="problem-new"),
    path("problems/<uuid:id>/", problem_detail_view, name="problem-detail"),
    path("problems/<uuid:id>/edit/", problem_edit_view, name="problem-edit"),
    path("problems/<uuid:id>/transition/", problem_transition_view, name="problem-transition"),
    path("problems/<uuid:id>/unlink/", problem_unlink_view, name="problem-unlink"),
    path("problems/<uuid:id>/markdown/", problem_markdown_view, name="problem-markdown"),
    path("runs/<uuid:id>/handover-box/", run_handover_box_view, name="run-handover-box"),
    path("jobs/<uuid:id>/pause/", job_pause_view, name="job-pause"),
    path("jobs/<uuid:id>/resume/", job_resume_view, name="job-resume"),
    path("jobs/<uuid:id>/ownership/", job_ownership_view, name="job-ownership"),
    path("teams/<uuid:id>/", team_detail_view, name="team-detail"),
    path("aged-work/", aged_work_mine_view, name="aged-work-mine"),
    path("targets/<uuid:id>/pause/", target_pause_view, name="target-pause"),
    path("targets/<uuid:id>/resume/", target_resume_view, name="target-resume"),
    # the signed-in person's own personal API tokens (a prefix is knox's token_key, e.g. ho_1a2b3c4d5e6f)
    path("account/tokens/", api_token_list_view, name="api-token-list"),
    path("account/tokens/new/", api_token_create_view, name="api-token-create"),
    path("account/tokens/<str:prefix>/revoke/", api_token_revoke_view, name="api-token-revoke"),
    # the signed-in person's notifications and profile (address, time zone, preferences, chat/push targets)
    path("notifications/", notification_list_view, name="notification-list"),
    path("notifications/read/", notification_read_view, name="notification-read"),
    path("profile/", profile_view, name="profile"),
    path("profile/email/", profile_email_view, name="profile-email"),
    path("profile/email/verify/<str:token>/", profile_email_verify_view, name="profile-email-verify"),
    path("profile/time-zone/", profile_time_zone_view, name="profile-time-zone"),
    path("profile/preferences/", profile_preferences_view, name="profile-preferences"),
    path("profile/targets/", profile_target_add_view, name="profile-target-add"),
    path("profile/targets/<uuid:id>/delete/", profile_target_delete_view, name="profile-target-delete"),
    path("profile/targets/<uuid:id>/test/", profile_target_test_view, name="profile-target-test"),
]
