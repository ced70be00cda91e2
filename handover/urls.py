"""Root URLs: the API (root and collections) under /api/v1/, its schema, Swagger UI, the HTML apps, admin, health."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from handover.accounts.preference_views import preferences
from handover.core.api_root import ApiRootView
from handover.core.health import healthz

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:run-list", permanent=False), name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("preferences/", preferences, name="preferences"),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/v1/", ApiRootView.as_view(), name="api-root"),
    path("api/v1/", include("runs.api_urls", namespace="runs-api")),
    path("api/v1/", include("handover.api_urls", namespace="handover-api")),
    path("api/v1/", include("approvals.api_urls", namespace="approvals-api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # the split view serves its start-up script as a file: the CSP allows no inline script
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    # no ReDoc: its bundle injects inline styles the CSP refuses; Swagger UI is the one interactive doc
    path("", include("runs.urls", namespace="runs")),
    path("", include("approvals.urls", namespace="approvals")),
    path("", include("handover.app_urls", namespace="handover")),
    path("", include("runs.catalog.manage_urls", namespace="manage")),
]

# Malformed ids never reach a view; API clients still get problem details (handover.core.error_views).
handler404 = "handover.core.error_views.not_found"
handler500 = "handover.core.error_views.server_error"
