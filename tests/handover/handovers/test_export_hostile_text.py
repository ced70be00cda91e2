"""Breaking the Markdown export: hostile text in every field adds no structure to the document.

Each payload is written into every user- or payload-controlled field a handover export shows; the
export, rendered by a CommonMark + GFM-tables parser, must have exactly the structure (headings,
tables, cells, links, images, lists, emphasis, code) of the same export with harmless text.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from django.db.models import Model
from django.test import Client
from django.utils import timezone

from handover.handovers.models import Handover
from handover.handovers.services import handover_create, residual_exception_create
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job
from tests.handover.helpers import World

SECTION_FIELDS = (
    "expected_output",
    "definitely_happened",
    "may_have_happened",
    "next_action",
    "affected",
    "business_impact",
    "deadlines",
    "recent_changes",
)
TAGS = ("h1", "h2", "h3", "table", "tr", "th", "td", "a", "img", "ul", "ol", "li", "strong", "em", "code", "hr")
PAYLOADS = [
    "plain words",
    # a GFM table: a header line with a pipe, then a delimiter row starting with a colon
    "intro\n| a | b |\n:--- | ---:\n| c | d |",
    "intro\n\\|\n:-\nrest of the section",
    " :-: ",
    "<script>alert(1)</script> <img src=x onerror=alert(1)> <!-- c --> <http://evil.example/a>",
    "[x](javascript:alert(1)) ![i](http://evil.example/p.png) [r]: http://evil.example",
    "a|b||c \\| d\\\\|e `x|y` ``` ~~~",
    "# h1\n## h2\n===\n---\n***\n___\n1. one\n2) two\n* star\n+plus",  # ("+ x", "- x": a person's list stays one)
    "*em* **strong** _em_ __strong__ ~~del~~",
    "＜script＞ ［x］（javascript:alert(1)） ｜ \u200b[\u200bx](y) \u2028 line",
    "line one\r\nline two\rline three\n\nnew paragraph",
]


def _structure(markdown: str) -> Counter[str]:
    markdown_it = pytest.importorskip("markdown_it")
    html = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
    return Counter({tag: len(re.findall(rf"<{tag}[\s>]", html)) for tag in TAGS + ("script", "s", "del", "pre")})


def _fit(model: type[Model], text: str, *fields: str) -> dict[str, str]:
    """``text`` for each of ``fields``, cut to the column's length (PostgreSQL refuses longer; SQLite doesn't)."""
    return {name: text[: model._meta.get_field(name).max_length or None] for name in fields}


def _export(world: World, text: str) -> str:
    handover = handover_create(actor=world.support, runs=[world.run])
    residual_exception_create(handover=handover, actor=world.support, description=text)
    Handover.objects.filter(pk=handover.pk).update(
        is_supportability_defect=True,
        reopen_count=1,
        **_fit(Handover, text, "title", "defect_ref", "supportability_ticket", "reopen_reason", *SECTION_FIELDS),
    )
    Job.objects.filter(pk=world.job.pk).update(paused_at=timezone.now(), **_fit(Job, text, "pause_reason"))
    Run.objects.filter(pk=world.run.pk).update(**_fit(Run, text, "environment"))
    for number, attempt in enumerate(Attempt.objects.filter(run=world.run).order_by("pk"), start=1):
        Attempt.objects.filter(pk=attempt.pk).update(**_fit(Attempt, f"{number} {text}", "execution_id"))
    client = Client()
    client.force_login(world.auditor)
    response = client.get(f"/api/v1/handovers/{handover.public_id}/markdown/")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("payload", PAYLOADS[1:])
def test_hostile_text_in_every_field_adds_no_structure_to_the_export(world: World, payload: str) -> None:
    # the harmless export, then the hostile one, of the same world
    expected = _structure(_export(world, PAYLOADS[0]))
    Handover.objects.all().delete()

    if "|" in payload or "\\" in payload:
        expected["code"] -= 1  # the execution id's cell, escaped as text instead of a code span (GFM splits on |)

    markdown = _export(world, payload)

    got = _structure(markdown)
    assert got == expected, {k: (expected[k], got[k]) for k in set(got) | set(expected) if got[k] != expected[k]}
