"""Django renders a form field's help text unescaped: one holding ``<`` or ``&`` loses words on the page
(``HANDOVER_SIGNING_SECRET_<NAME>`` showed as ``HANDOVER_SIGNING_SECRET_``)."""

from __future__ import annotations

import importlib
import pkgutil

from django import forms

import approvals
import handover
import runs


def _form_classes() -> list[type[forms.BaseForm]]:
    for package in (handover, runs, approvals):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if module.name.rsplit(".", 1)[-1].endswith("forms"):
                importlib.import_module(module.name)
    found: list[type[forms.BaseForm]] = []
    todo: list[type] = [forms.Form, forms.ModelForm]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.split(".")[0] in ("handover", "runs", "approvals"):
                found.append(sub)
    return found


def test_no_form_help_text_holds_markup_characters() -> None:
    classes = _form_classes()
    assert len(classes) > 20  # the project's forms were found
    offending = [
        f"{cls.__module__}.{cls.__name__}.{name}"
        for cls in classes
        for name, field in getattr(cls, "base_fields", {}).items()
        if any(ch in str(field.help_text or "") for ch in "<&")
    ]
    assert offending == []
