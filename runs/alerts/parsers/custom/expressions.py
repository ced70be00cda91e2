"""JMESPath with a few pure string functions, ``{{ }}`` templates, and field specs compiled from a
mapping (an expression, a template or a constant); errors are ``MappingError`` with a message for a person."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath import functions as jmespath_functions

from runs.alerts.parsers.custom.vocabulary import FIELDS, MAX_EXPRESSION_CHARS, TIME_FORMATS

_TEMPLATE_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


class _Functions(jmespath_functions.Functions):
    """Extra JMESPath functions: pure, bounded string helpers (no I/O, no code)."""

    @jmespath_functions.signature({"types": ["string"]}, {"types": ["string"]})
    def _func_split(self, text: str, separator: str) -> list[str]:
        if not separator:
            return list(text)
        return text.split(separator)

    @jmespath_functions.signature({"types": ["string"]})
    def _func_lower(self, text: str) -> str:
        return text.lower()

    @jmespath_functions.signature({"types": ["string"]})
    def _func_upper(self, text: str) -> str:
        return text.upper()

    @jmespath_functions.signature({"types": ["string"]})
    def _func_trim(self, text: str) -> str:
        return text.strip()

    @jmespath_functions.signature({"types": ["string"]}, {"types": ["string"]}, {"types": ["string"]})
    def _func_replace(self, text: str, old: str, new: str) -> str:
        if not old:
            return text
        return text.replace(old, new)


_OPTIONS = jmespath.Options(custom_functions=_Functions())
FUNCTION_NAMES = frozenset(_Functions.FUNCTION_TABLE)  # type: ignore[attr-defined]


class MappingError(ValueError):
    """A mapping expression that cannot be compiled or evaluated; the message is for a person."""


def _function_names(node: Any) -> set[str]:
    names: set[str] = set()
    if isinstance(node, dict):
        if node.get("type") == "function_expression":
            names.add(str(node.get("value")))
        for child in node.get("children", []):
            names |= _function_names(child)
    return names


def compile_expression(text: Any) -> Any:
    """Compile one JMESPath expression; raise ``MappingError`` naming what is wrong.

    Unknown function names are refused here (JMESPath itself only notices them when evaluating).
    """
    if not isinstance(text, str) or not text.strip():
        raise MappingError("an expression must be a non-empty string")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise MappingError(f"an expression holds at most {MAX_EXPRESSION_CHARS} characters")
    try:
        compiled = jmespath.compile(text)
    except jmespath_errors.JMESPathError as exc:
        raise MappingError(f"`{text}` is not a valid JMESPath expression: {_one_line(exc)}") from exc
    unknown = sorted(_function_names(compiled.parsed) - FUNCTION_NAMES)
    if unknown:
        raise MappingError(f"`{text}` calls unknown function{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}()")
    return compiled


def _one_line(exc: Exception) -> str:
    text = str(exc).strip()
    return " ".join(text.split()) if text else type(exc).__name__


def jmespath_search(compiled: Any, data: Any) -> Any:
    try:
        return compiled.search(data, options=_OPTIONS)
    except jmespath_errors.JMESPathError as exc:
        raise MappingError(f"`{compiled.expression}` failed: {_one_line(exc)}") from exc
    except (TypeError, ValueError, OverflowError) as exc:  # e.g. sort_by over mixed types
        raise MappingError(f"`{compiled.expression}` failed: {_one_line(exc)}") from exc


def as_text(value: Any) -> str:
    """How a placeholder prints a value: strings as they are, whole floats without ``.0``, JSON else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass
class FieldSpec:
    """A compiled field spec: an expression, a template, or a constant (plus a time format)."""

    name: str
    shown: str  # how the editor shows the spec
    evaluate: Callable[[Any], tuple[Any, str]]  # record -> (value, what found nothing / "")
    time_format: str | None = None


def _spec_path(text: Any) -> Callable[[Any], tuple[Any, str]]:
    compiled = compile_expression(text)

    def evaluate(record: Any) -> tuple[Any, str]:
        value = jmespath_search(compiled, record)
        return value, ("" if value not in (None, "") else f"`{text}` found nothing")

    return evaluate


def _spec_template(text: Any) -> Callable[[Any], tuple[Any, str]]:
    if not isinstance(text, str) or not text:
        raise MappingError("a template must be a non-empty string")
    if len(text) > MAX_EXPRESSION_CHARS * 2:
        raise MappingError(f"a template holds at most {MAX_EXPRESSION_CHARS * 2} characters")
    pieces: list[str | Any] = []
    position = 0
    for match in _TEMPLATE_PLACEHOLDER.finditer(text):
        pieces.append(text[position : match.start()])
        pieces.append(compile_expression(match.group(1).strip()))
        position = match.end()
    rest = text[position:]
    if "{{" in rest or "}}" in rest:
        raise MappingError(f"the template `{text}` has an unbalanced {{{{ or }}}}")
    pieces.append(rest)
    if not any(not isinstance(p, str) for p in pieces):
        raise MappingError(f"the template `{text}` has no {{{{ placeholder }}}}; use a value for a constant")

    def evaluate(record: Any) -> tuple[Any, str]:
        out: list[str] = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            value = jmespath_search(piece, record)
            if value in (None, ""):
                return None, f"`{piece.expression}` in the template found nothing"
            out.append(as_text(value))
        return "".join(out), ""

    return evaluate


def compile_field(name: str, spec: Any) -> FieldSpec:
    """Compile the spec of field ``name``; raise ``MappingError`` for an unusable one."""
    time_format = None
    if isinstance(spec, str):
        return FieldSpec(name=name, shown=spec, evaluate=_spec_path(spec))
    if not isinstance(spec, Mapping):
        raise MappingError("give a JMESPath expression, or an object with `path`, `template` or `value`")
    unknown = sorted(set(spec) - {"path", "template", "value", "format"})
    if unknown:
        raise MappingError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    chosen = [k for k in ("path", "template", "value") if k in spec]
    if len(chosen) != 1:
        raise MappingError("give exactly one of `path`, `template` or `value`")
    if "format" in spec:
        if FIELDS.get(name) != "time":
            raise MappingError("`format` applies to time fields only")
        if spec["format"] not in TIME_FORMATS:
            raise MappingError(f"`format` must be one of {', '.join(TIME_FORMATS)}")
        time_format = spec["format"]
    kind = chosen[0]
    if kind == "path":
        return FieldSpec(name, str(spec["path"]), _spec_path(spec["path"]), time_format)
    if kind == "template":
        return FieldSpec(name, str(spec["template"]), _spec_template(spec["template"]), time_format)
    constant = spec["value"]
    if constant is None or isinstance(constant, (dict, list)):
        raise MappingError("a `value` must be a string, number or boolean")
    return FieldSpec(name, json.dumps(constant, ensure_ascii=False), lambda _record: (constant, ""), time_format)
