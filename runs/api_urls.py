"""``/api/v1/`` routes of the runs app."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from runs.api import AlertIngestView, AlertViewSet, IntegrationViewSet, NextRunCheckViewSet, RunViewSet

router = DefaultRouter(use_regex_path=False)
router.include_root_view = False
router.register("runs", RunViewSet, basename="run")
router.register("alerts", AlertViewSet, basename="alert")
router.register("integrations", IntegrationViewSet, basename="integration")
router.register("checks", NextRunCheckViewSet, basename="check")

app_name = "runs-api"
urlpatterns = [
    # The UUID converter on the router's detail routes keeps /alerts/<uuid>/ and /alerts/<source>/
    # apart: the router comes first, so only a non-UUID segment reaches the ingestion view.
    *router.urls,
    path("alerts/<slug:source>/", AlertIngestView.as_view(), name="alert-ingest"),
]
