"""Reading a page's form as a browser would post it (for tests that post what a person saw)."""

from __future__ import annotations

from html.parser import HTMLParser

from django.test import Client


class _FormFields(HTMLParser):
    """The fields a browser would post from the first form whose action ends with ``action`` (``""``: the
    first form posting to its own page, i.e. without an action)."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action, self.inside, self.done = action, False, False
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        target = a.get("action", "")
        if tag == "form" and not self.done and (target.endswith(self.action) if self.action else not target):
            self.inside = True
        if not self.inside:
            return
        name = a.get("name", "")
        if tag == "input" and name and a.get("type") not in ("submit", "button"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields[name] = a.get("value", "on" if a.get("type") == "checkbox" else "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and ("selected" in a or self._select not in self.fields):
            self.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields[name] = ""

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            if self._textarea and self.fields[self._textarea].startswith("\n"):
                self.fields[self._textarea] = self.fields[self._textarea][1:]
            self._textarea = None
        elif tag == "form" and self.inside:
            self.inside, self.done = False, True


def page_form(client: Client, url: str, action: str = "") -> dict[str, str]:
    """The form of ``url``'s page as a browser would post it, nothing changed."""
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    parser = _FormFields(action)
    parser.feed(response.content.decode())
    assert parser.fields, f"no form posting to {action!r} on {url}"
    return parser.fields
