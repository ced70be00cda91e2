"""The Markdown export escapes untrusted text: payload and people's text add no links, images, HTML or cells."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from handover.handovers.models import Handover
from handover.handovers.services import handover_create, handover_update
from handover.templatetags.handover_tags import markdown_code, markdown_escape
from runs.attempts.models import Attempt
from tests.handover.helpers import World

HOSTILE = (
    "<script>alert(1)</script> & [click](javascript:alert(1)) ![img](http://evil.example/pixel.png)"
    " `rm -rf` a|b *bold* _em_ ~~gone~~ <http://evil.example/auto>"
)


def _html(markdown: str) -> str:
    """The export as a ticket system would show it (CommonMark with GFM tables)."""
    markdown_it = pytest.importorskip("markdown_it")
    return str(markdown_it.MarkdownIt("commonmark").enable("table").render(markdown))


def test_markdown_escape_turns_hostile_text_into_inert_readable_text() -> None:
    escaped = str(markdown_escape(HOSTILE))

    assert escaped == (
        r"&lt;script&gt;alert(1)&lt;/script&gt; &amp; \[click\](javascript:alert(1)) !\[img\](http://evil.example/pixel.png)"
        r" \`rm -rf\` a\|b \*bold\* \_em\_ \~\~gone\~\~ &lt;http://evil.example/auto&gt;"
    )
    html = _html(escaped)
    assert "<script" not in html and "<img" not in html and "<a " not in html and "<code>" not in html
    assert "<em>" not in html and "<strong>" not in html and "<del>" not in html
    # rendered, it reads exactly as written
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; [click](javascript:alert(1)) ![img](" in html


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Closing conditions", r"\# Closing conditions"),
        ("1. first", r"1\. first"),
        ("3.5 s later", "3.5 s later"),
        ("---", r"\---"),
        ("===", r"\==="),
        ("+ plus", "+ plus"),
        ("- a bullet stays a bullet", "- a bullet stays a bullet"),
        ("- # a heading inside a bullet", r"- \# a heading inside a bullet"),
        ("nightly_invoice_export", "nightly_invoice_export"),
        ("Acme Foods' invoices (2026-11-27)", "Acme Foods' invoices (2026-11-27)"),
        (None, ""),
    ],
)
def test_markdown_escape_escapes_block_syntax_at_line_starts_only(text: str | None, expected: str) -> None:
    assert str(markdown_escape(text)) == expected


def test_markdown_escape_inline_folds_lines_so_text_cannot_end_a_list_item_or_a_row() -> None:
    assert str(markdown_escape("first\n\n## Closing conditions\n- [x] all met", "inline")) == (
        r"first ## Closing conditions - \[x\] all met"
    )
    assert str(markdown_escape("- not a bullet", "inline")) == r"\- not a bullet"


def test_markdown_code_fences_around_backticks_and_keeps_table_cells_whole() -> None:
    assert str(markdown_code("exp-a2")) == "`exp-a2`"
    assert str(markdown_code("a`b")) == "``a`b``"
    assert str(markdown_code("`x`")) == "`` `x` ``"
    assert str(markdown_code("a|b", "cell")) == r"a\|b"
    assert str(markdown_code("a\\|b", "cell")) == r"a\\\|b"
    assert str(markdown_code("C:\\jobs", "cell")) == r"`C:\jobs`"  # a backslash alone is literal in a code span
    assert str(markdown_code("two\nlines")) == "`two lines`"


@pytest.mark.django_db
def test_the_export_of_a_handover_with_hostile_payload_text_keeps_its_structure(world: World) -> None:
    Attempt.objects.filter(pk=world.retry.pk).update(execution_id="exp|`a2`<b>", error_summary=HOSTILE)
    handover = handover_create(actor=world.support, runs=[world.run])
    handover_update(
        handover=handover,
        actor=world.support,
        sections={"business_impact": "Invoices late.\n## Closing conditions\n- [x] all met\n" + HOSTILE},
        fields={"defect_ref": "BUG-1 [fix](javascript:alert(2))"},
    )
    client = Client()
    client.force_login(world.auditor)

    markdown = client.get(f"/api/v1/handovers/{handover.public_id}/markdown/").content.decode()

    html = _html(markdown)
    assert "<script" not in html and "<img" not in html
    assert not re.search(r'href="(?!https?:)', html), "no link but http(s)"
    assert "<a " not in html, "the export itself links nothing: payload URLs stay text"
    # the document keeps its own headings, in order, and no more
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings[0] == "Runs and executions" and headings[-2:] == ["Residual exceptions", "Closing conditions"]
    assert headings.count("Closing conditions") == 1
    # every row of the runs table has its eight cells, the hostile execution id in one of them
    table = html[html.index("<table>") : html.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    assert len(rows) == 2 and all(len(re.findall(r"<t[hd]", row)) == 8 for row in rows)
    assert "exp|`a2`&lt;b&gt; (attempt 2)" in rows[1]
    # readable: the text appears as written, raw and rendered
    assert "**Engineering defect:** BUG-1 \\[fix\\](javascript:alert(2))" in markdown
    assert "Invoices late.\n\\## Closing conditions\n- \\[x\\] all met\n&lt;script&gt;" in markdown
    assert "[click](javascript:alert(1))" in html
    assert Handover.objects.get(pk=handover.pk).business_impact.startswith("Invoices late.")
