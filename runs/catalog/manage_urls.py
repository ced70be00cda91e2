"""HTML routes of the admin pages (``/manage/``, staff only) and the audit trail (``/audit/``).

Namespace ``manage``: names ``manage:<entity>-<action>``.
"""

from __future__ import annotations

from django.urls import path

from runs.audit.views import audit_list_view
from runs.catalog.manage_views import (
    integration_security_view,
    key_create_view,
    key_list_view,
    key_revoke_view,
    key_rotate_view,
    role_grant_view,
    role_list_view,
    role_revoke_view,
)

app_name = "manage"
urlpatterns = [
    path("manage/roles/", role_list_view, name="role-list"),
    path("manage/roles/grant/", role_grant_view, name="role-grant"),
    path("manage/roles/revoke/", role_revoke_view, name="role-revoke"),
    path("manage/keys/", key_list_view, name="key-list"),
    path("manage/keys/create/", key_create_view, name="key-create"),
    path("manage/keys/<uuid:id>/rotate/", key_rotate_view, name="key-rotate"),
    path("manage/keys/<uuid:id>/revoke/", key_revoke_view, name="key-revoke"),
    path(
        "manage/integrations/<uuid:id>/security/",
        integration_security_view,
        name="integration-security",
    ),
    path("audit/", audit_list_view, name="audit-list"),
]
