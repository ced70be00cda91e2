"""HTML routes of the admin pages (``/manage/``, staff only) and the audit trail (``/audit/``).

Namespace ``manage``: names ``manage:<entity>-<action>``.
"""

from __future__ import annotations

from django.urls import path

from runs import views_admin

app_name = "manage"
urlpatterns = [
    path("manage/roles/", views_admin.role_list_view, name="role-list"),
    path("manage/roles/grant/", views_admin.role_grant_view, name="role-grant"),
    path("manage/roles/revoke/", views_admin.role_revoke_view, name="role-revoke"),
    path("manage/keys/", views_admin.key_list_view, name="key-list"),
    path("manage/keys/create/", views_admin.key_create_view, name="key-create"),
    path("manage/keys/<uuid:id>/rotate/", views_admin.key_rotate_view, name="key-rotate"),
    path("manage/keys/<uuid:id>/revoke/", views_admin.key_revoke_view, name="key-revoke"),
    path(
        "manage/integrations/<uuid:id>/security/",
        views_admin.integration_security_view,
        name="integration-security",
    ),
    path("audit/", views_admin.audit_list_view, name="audit-list"),
]
