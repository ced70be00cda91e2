"""HTML routes of the handover app (names ``handover:<entity>-<action>``).

``handover/urls.py`` is the project's root URLconf and includes these; this module holds only the
handover app's own pages.
"""

from __future__ import annotations

from django.urls import path

from handover import views

app_name = "handover"
urlpatterns = [
    path("handovers/", views.handover_list_view, name="handover-list"),
    path("handovers/mine/", views.handover_mine_view, name="handover-mine"),
    path("handovers/attention/", views.attention_view, name="attention"),
    path("handovers/new/", views.handover_new_view, name="handover-new"),
    path("handovers/<uuid:id>/", views.handover_detail_view, name="handover-detail"),
    path("handovers/<uuid:id>/edit/", views.handover_edit_view, name="handover-edit"),
    path("handovers/<uuid:id>/print/", views.handover_print_view, name="handover-print"),
    path("handovers/<uuid:id>/markdown/", views.handover_markdown_view, name="handover-markdown"),
    path("handovers/<uuid:id>/history/", views.handover_history_view, name="handover-history"),
    path("handovers/<uuid:id>/exceptions/", views.residual_exception_add_view, name="residual-exception-add"),
    path(
        "handovers/<uuid:id>/exceptions/<uuid:exception_id>/",
        views.residual_exception_edit_view,
        name="residual-exception-edit",
    ),
    path("handovers/<uuid:id>/<slug:action>/", views.handover_action_view, name="handover-action"),
    path("runs/<uuid:id>/handover-box/", views.run_handover_box_view, name="run-handover-box"),
    path("jobs/<uuid:id>/pause/", views.job_pause_view, name="job-pause"),
    path("jobs/<uuid:id>/resume/", views.job_resume_view, name="job-resume"),
    # the signed-in person's own personal API tokens (a prefix is knox's token_key, e.g. ho_1a2b3c4d5e6f)
    path("account/tokens/", views.api_token_list_view, name="api-token-list"),
    path("account/tokens/new/", views.api_token_create_view, name="api-token-create"),
    path("account/tokens/<str:prefix>/revoke/", views.api_token_revoke_view, name="api-token-revoke"),
]
