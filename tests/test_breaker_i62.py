"""Regressions found by breaking the pages as people would (issue i62): wrong roles, double and stale
submits, hostile form values. Each test failed before its fix."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.catalog.models import Job
from runs.catalog.services import role_grant
from runs.timeline.models import TimelineEvent
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("next_value", ["abc", "-1", "home", "logout"])
def test_a_pause_form_whose_next_is_not_a_path_pauses_once_and_goes_back_to_the_pause_page(next_value: str) -> None:
    """``next`` is a path or nothing: a bare word was taken for a URL name (``redirect`` reverses it), so the
    pause was written and the answer was a 500 (NoReverseMatch), or a redirect to whatever view it named."""
    job = JobFactory()
    owner = UserFactory()
    role_grant(user=owner, role="technical_owner", obj=job)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    url = f"/jobs/{job.public_id}/pause/"

    response = client.post(url, {"reason": "ledger gateway maintenance", "next": next_value})

    assert response.status_code == 302 and response["Location"] == url
    assert Job.objects.get(pk=job.pk).pause_reason == "ledger gateway maintenance"
    assert TimelineEvent.objects.filter(kind=TimelineEvent.Kind.JOB_PAUSED, job=job).count() == 1
