"""The demo: a handover for acme-foods' partially committed run, readable in the browser and as Markdown."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from handover.handovers.models import Handover, HandoverRun

pytestmark = pytest.mark.django_db


def test_the_demo_writes_one_handover_once_readable_and_exportable() -> None:
    call_command("load_demo", demo=True, stdout=StringIO())
    call_command("load_demo", demo=True, stdout=StringIO())  # idempotent: nothing changes the second time

    # the invoice export's handover for acme-foods (the demo problem drafts a second one, for
    # ironbridge-telecom), and the two of the demo history (approvals/recurrence/demo.py), once each
    assert Handover.objects.filter(job__key="nightly-payment-sync", is_supportability_defect=True).count() == 2
    handover = Handover.objects.get(job__key="nightly-invoice-export", links__run__tenant__slug_key="acme-foods")
    link = HandoverRun.objects.select_related("run__tenant").get(handover=handover)
    assert link.run.tenant.slug == "acme-foods" and link.run.window_start.isoformat() == "2026-11-26T23:00:00+00:00"
    assert handover.status == "handed_over" and handover.escalation_owner.get_username() == "tech-owner"
    assert handover.title == "nightly-invoice-export · acme-foods · prod · window 2026-11-27"

    client = Client()
    client.force_login(get_user_model().objects.get(username="support"))
    page = client.get(f"/handovers/{handover.public_id}/")
    assert page.status_code == 200 and "Acme Foods&#x27; invoices" in page.content.decode()
    markdown = client.get(f"/api/v1/handovers/{handover.public_id}/markdown/").content.decode()
    assert markdown.startswith("# Handover: nightly-invoice-export · acme-foods · prod · window 2026-11-27")
    assert "Timeout waiting for acknowledgement from ledger gateway" in markdown
    assert "The job runner reported 4 attempted, 2 claimed completed" in markdown
    assert "## Business impact\n\nAcme Foods' invoices" in markdown
