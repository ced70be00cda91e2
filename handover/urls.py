"""Root URLs: the API under /api/v1/, its schema and offline docs, the HTML apps, admin, health."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from handover import views

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:run-list", permanent=False), name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("preferences/", views.preferences, name="preferences"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("runs.api_urls", namespace="runs-api")),
    path("api/v1/", include("handover.api_urls", namespace="handover-api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("", include("runs.urls", namespace="runs")),
    path("", include("handover.app_urls", namespace="handover")),
]
