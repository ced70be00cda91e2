"""``/api/v1/`` routes of the runs app."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from runs.alerts.api import AlertViewSet
from runs.alerts.receive_api import AlertIngestUrlKeyView, AlertIngestView
from runs.attempts.api import RunViewSet
from runs.audit.api import AuditEventViewSet
from runs.catalog.api import JobViewSet
from runs.catalog.integrations_api import IntegrationViewSet
from runs.catalog.runner_credentials_api import RunnerCredentialDetailView, RunnerCredentialListView
from runs.catalog.sources_api import SourceViewSet
from runs.checks.api import NextRunCheckViewSet
from runs.ledger import api as workitems

router = DefaultRouter(use_regex_path=False)
router.include_root_view = False
# JSON only: no ``.json`` twins of every route (custom actions take no ``format`` argument: a 500)
router.include_format_suffixes = False
router.register("runs", RunViewSet, basename="run")
router.register("alerts", AlertViewSet, basename="alert")
router.register("jobs", JobViewSet, basename="job")
router.register("integrations", IntegrationViewSet, basename="integration")
router.register("sources", SourceViewSet, basename="source")
router.register("checks", NextRunCheckViewSet, basename="check")
router.register("audit-events", AuditEventViewSet, basename="audit-event")

app_name = "runs-api"
urlpatterns = [
    # The UUID converter on the router's detail routes keeps /alerts/<uuid>/ and /alerts/<source>/
    # apart: the router comes first, so only a non-UUID segment reaches the ingestion view.
    *router.urls,
    path("alerts/<slug:source>/", AlertIngestView.as_view(), name="alert-ingest"),
    path("alerts/<slug:source>/k/<str:key>/", AlertIngestUrlKeyView.as_view(), name="alert-ingest-url-key"),
    # the work ledger of a run (docs/work-ledger.md); every path contains "items". Ids are checked in the view,
    # so a malformed one answers a problem-details 404 like any unknown run (not the HTML 404).
    path("runs/<str:id>/items/", workitems.WorkItemListView.as_view(), name="work-item-list"),
    path("runs/<str:id>/items/summary/", workitems.RunLedgerView.as_view(), name="run-ledger"),
    path("runs/<str:id>/items/changes/", workitems.WorkItemChangeListView.as_view(), name="work-item-change-list"),
    path("runs/<str:id>/items/change/", workitems.WorkItemChangeView.as_view(), name="work-item-change"),
    path("runs/<str:id>/items/verify/", workitems.WorkItemVerifyView.as_view(), name="work-item-verify"),
    path(
        "runs/<str:id>/items/explain-duplicate/",
        workitems.WorkItemDuplicateExplainView.as_view(),
        name="work-item-duplicate-explain",
    ),
    path(
        "runs/<str:id>/items/failure-class/",
        workitems.RunFailureClassConfirmView.as_view(),
        name="run-failure-class-confirm",
    ),
    path("runs/<str:id>/items/loads/", workitems.WorkItemLoadListCreateView.as_view(), name="work-item-load-list"),
    path(
        "runs/<str:id>/items/loads/<str:load_id>/",
        workitems.WorkItemLoadDetailView.as_view(),
        name="work-item-load-detail",
    ),
    path(
        "runs/<str:id>/items/loads/<str:load_id>/retry/",
        workitems.WorkItemLoadRetryView.as_view(),
        name="work-item-load-retry",
    ),
    path(
        "runs/<str:id>/items/loads/<str:load_id>/confirm/",
        workitems.WorkItemLoadConfirmView.as_view(),
        name="work-item-load-confirm",
    ),
    path(
        "runs/<str:id>/items/loads/<str:load_id>/discard/",
        workitems.WorkItemLoadDiscardView.as_view(),
        name="work-item-load-discard",
    ),
    path("items/", workitems.WorkItemSearchView.as_view(), name="work-item-search"),
    path("jobs/<uuid:id>/runner-credentials/", RunnerCredentialListView.as_view(), name="runner-credential-list"),
    path(
        "jobs/<uuid:id>/runner-credentials/<str:prefix>/",
        RunnerCredentialDetailView.as_view(),
        name="runner-credential-detail",
    ),
]
