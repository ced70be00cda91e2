from __future__ import annotations
import pytest
from runs.models import WorkItem, TimelineEvent, WorkItemLoad
from runs.services import role_grant
from runs.services.ledger import work_item_load_create, work_item_verify
from tests.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db

def test_smoke() -> None:
    run = RunFactory(failed=True)
    u = UserFactory()
    role_grant(user=u, role="support", obj=run.tenant)
    work_item_load_create(user=u, run=run, kind="population", content=b"record_id,skip_reason,amount\nA1,,10\nA2,,20\nA3,credit note,5\nA4,,1\nA5,,2\n")
    work_item_load_create(user=u, run=run, kind="runner_report", content=b"record_id,status\nA1,completed\nA2,failed\nA4,completed\nA5,attempted\n")
    work_item_load_create(user=u, run=run, kind="destination", content=b"record_id,reference\nA1,r1\nA1,r1b\nX9,rx\n")
    print({i.record_id: (i.outcome, i.evidence_kind, i.is_possible_duplicate, i.evidence_note) for i in WorkItem.objects.all()})
    work_item_verify(user=u, run=run, record_id="A4", found=True, reference="op-1")
    work_item_load_create(user=u, run=run, kind="destination", content=b"record_id,reference\nA1,r1\n", is_destination_complete=True)
    print({i.record_id: (i.outcome, i.evidence_kind, i.is_possible_duplicate, i.evidence_note) for i in WorkItem.objects.all()})
    run.refresh_from_db()
    print(run.eligible_count, run.completed_count, run.unresolved_count, run.absent_count, run.possible_duplicate_count, run.failure_class_suggested)
    for e in TimelineEvent.objects.order_by("id"): print(e.kind, e.summary)
    print(list(WorkItemLoad.objects.values_list("status", "counts")))
