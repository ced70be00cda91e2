"""Frozen names: what the outside world sees of the project, compared with a committed snapshot.

Before moving code around ("change no behaviour"), the names other systems depend on are frozen
here: Celery task names and the beat schedule (brokers hold queued messages by task name), URL names
and paths (bookmarks, links in e-mail, ``reverse()``), management commands and their options (cron
lines, runbooks), template names (overrides), timeline and alert kind strings (rows already stored),
model tables (the database), the project callables migrations import, and the OpenAPI operations
(generated clients). The snapshots live in ``tests/data/frozen/`` and are regenerated only by hand
(``tests/data/frozen/README.md``); these tests never write them.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import call_command, get_commands, load_command_class
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.module_loading import import_string

REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = Path(__file__).resolve().parent / "data" / "frozen"
# Task, timeline and migration names of the project start with these (Celery's own ``celery.*`` are not ours).
PROJECT_PREFIXES = ("runs.", "handover.", "approvals.")
# The options every Django command has; a command's own options are what is frozen.
DJANGO_DEFAULT_DESTS = frozenset(
    {"help", "version", "verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color", "skip_checks"}
)
ENQUEUE_METHODS = frozenset({"delay", "delay_on_commit", "apply_async"})


# --- snapshot files ------------------------------------------------------------------------------


def snapshot_dump(value: Any) -> str:
    """The committed form of a snapshot: pretty-printed, keys sorted, one trailing newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def snapshot_load(name: str) -> Any:
    path = SNAPSHOTS / f"{name}.json"
    assert path.exists(), f"missing snapshot {path}; see tests/data/frozen/README.md"
    return json.loads(path.read_text(encoding="utf-8"))


def _diff_lists(expected: Iterable[Any], actual: Iterable[Any]) -> str:
    exp = {json.dumps(x, sort_keys=True, ensure_ascii=False) for x in expected}
    act = {json.dumps(x, sort_keys=True, ensure_ascii=False) for x in actual}
    removed = sorted(exp - act)
    added = sorted(act - exp)
    return (
        "removed (in the snapshot, gone now):\n  "
        + "\n  ".join(removed or ["-"])
        + ("\nadded (new, not in the snapshot):\n  " + "\n  ".join(added or ["-"]))
    )


def _diff_dicts(expected: dict[str, Any], actual: dict[str, Any]) -> str:
    lines = [f"removed: {k}" for k in sorted(expected.keys() - actual.keys())]
    lines += [f"added: {k}" for k in sorted(actual.keys() - expected.keys())]
    lines += [
        f"changed: {k}\n  was: {json.dumps(expected[k], sort_keys=True)}"
        f"\n  now: {json.dumps(actual[k], sort_keys=True)}"
        for k in sorted(expected.keys() & actual.keys())
        if expected[k] != actual[k]
    ]
    return "\n".join(lines)


# --- the project's own code ----------------------------------------------------------------------


def _is_project_path(path: Path) -> bool:
    resolved = path.resolve()
    return resolved.is_relative_to(REPO) and not {"site-packages", ".venv"} & set(resolved.parts)


def project_app_configs() -> list[Any]:
    """Installed apps whose code lives in this repository (runs, handover, approvals, and any slice app)."""
    return [config for config in apps.get_app_configs() if _is_project_path(Path(config.path))]


def project_app_names() -> set[str]:
    return {config.name for config in project_app_configs()}


def source_roots() -> list[Path]:
    """Top-level folders of project code: every project app's folder and the settings package's."""
    roots = {Path(config.path).resolve() for config in project_app_configs()}
    roots.add(Path(importlib.import_module(settings.SETTINGS_MODULE).__file__).resolve().parent)
    return sorted(r for r in roots if not any(other != r and r.is_relative_to(other) for other in roots))


def source_files() -> list[Path]:
    """The project's Python source, without migrations and tests."""
    files = set()
    for root in source_roots():
        for path in root.rglob("*.py"):
            if not {"migrations", "tests", "__pycache__"} & set(path.relative_to(root).parts):
                files.add(path)
    return sorted(files)


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _parsed_sources() -> list[tuple[Path, ast.Module]]:
    return [(path, _parse(path)) for path in source_files()]


# --- 1. Celery -----------------------------------------------------------------------------------


def _decorator_task_name(decorator: ast.expr) -> str | None:
    """``name=`` of a ``@shared_task(...)`` / ``@app.task(...)`` decorator."""
    if not isinstance(decorator, ast.Call):
        return None
    func = decorator.func
    callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if callee not in {"shared_task", "task"}:
        return None
    for keyword in decorator.keywords:
        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
            return keyword.value.value
    return None


def declared_task_names() -> dict[str, str]:
    """Function name -> task name of every ``@shared_task(name=...)`` in the project's source."""
    declared: dict[str, str] = {}
    for _, tree in _parsed_sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    name = _decorator_task_name(decorator)
                    if name is not None:
                        declared[node.name] = name
    return declared


def enqueued_task_names() -> tuple[set[str], list[str]]:
    """Task names enqueued anywhere (``.delay``, ``.delay_on_commit``, ``.apply_async``, ``send_task("x")``).

    Returns the names and the call sites that could not be traced to a task (``file:line code``).
    """
    declared = declared_task_names()
    names: set[str] = set()
    unresolved: list[str] = []
    for path, tree in _parsed_sources():
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = alias.name
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            where = f"{path.relative_to(REPO)}:{node.lineno} {ast.unparse(node)}"
            if node.func.attr == "send_task":
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
                else:
                    unresolved.append(where)
            elif node.func.attr in ENQUEUE_METHODS:
                target = node.func.value
                function = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
                function = aliases.get(function, function) if function else None
                if function in declared:
                    names.add(declared[function])
                else:
                    unresolved.append(where)
    return names, sorted(unresolved)


def registered_task_names() -> list[str]:
    """The project's task names the Celery app knows after the autodiscovery a worker does."""
    from handover.celery import app

    app.loader.import_default_modules()
    return sorted(name for name in app.tasks if name.startswith(PROJECT_PREFIXES))


def _schedule_json(schedule: Any) -> Any:
    if isinstance(schedule, int | float):
        return float(schedule)
    if hasattr(schedule, "total_seconds"):
        return schedule.total_seconds()
    return repr(schedule)


def collect_celery() -> dict[str, Any]:
    beat = {
        entry: {
            "task": spec["task"],
            "schedule": _schedule_json(spec["schedule"]),
            **{key: spec[key] for key in ("args", "kwargs", "options") if key in spec},
        }
        for entry, spec in settings.CELERY_BEAT_SCHEDULE.items()
    }
    return {"tasks": registered_task_names(), "beat_schedule": beat}


def test_celery_task_names_and_beat_schedule_are_frozen() -> None:
    """Queued messages and beat entries name tasks by string: a renamed task leaves them undeliverable."""
    expected = snapshot_load("celery")
    actual = collect_celery()

    assert actual["tasks"] == expected["tasks"], _diff_lists(expected["tasks"], actual["tasks"])
    assert actual["beat_schedule"] == expected["beat_schedule"], _diff_dicts(
        expected["beat_schedule"], actual["beat_schedule"]
    )
    declared = set(declared_task_names().values())
    assert declared <= set(actual["tasks"]), f"declared but not registered: {sorted(declared - set(actual['tasks']))}"


WORKER_PROBE = """
import json
import django
django.setup()
from django.conf import settings
from handover.celery import app
app.loader.import_default_modules()
print(json.dumps({
    "tasks": sorted(app.tasks),
    "beat": sorted(spec["task"] for spec in (app.conf.beat_schedule or {}).values()),
    "settings_beat": sorted(spec["task"] for spec in settings.CELERY_BEAT_SCHEDULE.values()),
}))
"""


def test_a_fresh_worker_process_registers_every_scheduled_and_enqueued_task() -> None:
    """A worker is a fresh process: a task found only because a test imported its module would not run there."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "handover.settings"}
    done = subprocess.run(
        [sys.executable, "-c", WORKER_PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    registered = set(probe["tasks"])
    enqueued, unresolved = enqueued_task_names()
    declared = set(declared_task_names().values())

    assert not unresolved, "enqueue calls not traced to a @shared_task(name=...):\n" + "\n".join(unresolved)
    assert probe["beat"] == probe["settings_beat"]
    wanted = {
        "beat": set(probe["beat"]),
        "enqueued": enqueued,
        "declared": declared,
        "snapshot": set(snapshot_load("celery")["tasks"]),
    }
    for what, names in wanted.items():
        assert names <= registered, f"{what} task names a fresh worker does not register: {sorted(names - registered)}"
    assert {n for n in registered if n.startswith(PROJECT_PREFIXES)} == wanted["snapshot"]


# --- 2. URLs -------------------------------------------------------------------------------------


def _walk_urls(resolver: URLResolver, prefix: str = "", namespace: str = "") -> Iterator[tuple[str, str, str]]:
    """(namespace, name, route) of every pattern, routes joined from the root."""
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            inner = ":".join(filter(None, [namespace, pattern.namespace or ""]))
            yield from _walk_urls(pattern, route, inner)
        elif isinstance(pattern, URLPattern):
            yield namespace, pattern.name or "", route


def collect_urls() -> dict[str, Any]:
    """``namespace:name -> route`` lines; admin pages of other apps' models are left out (noise)."""
    project_labels = {config.label for config in project_app_configs()}
    other_labels = {config.label for config in apps.get_app_configs()} - project_labels
    lines = []
    for namespace, name, route in _walk_urls(get_resolver()):
        if namespace == "admin" and any(route.startswith(f"admin/{label}/") for label in other_labels):
            continue
        qualified = f"{namespace}:{name}" if namespace and name else name or "<unnamed>"
        lines.append(f"{qualified} -> {route}")
    urlconf = get_resolver().urlconf_module
    handlers = {
        f"handler{code}": getattr(urlconf, f"handler{code}")
        for code in (400, 403, 404, 500)
        if isinstance(getattr(urlconf, f"handler{code}", None), str)
    }
    return {"patterns": sorted(lines), "handlers": handlers}


def test_url_names_and_paths_are_frozen() -> None:
    """Paths are in bookmarks, e-mails and runbooks, and names in ``reverse()`` and templates."""
    expected = snapshot_load("urls")
    actual = collect_urls()

    assert actual["patterns"] == expected["patterns"], _diff_lists(expected["patterns"], actual["patterns"])
    assert actual["handlers"] == expected["handlers"]
    for dotted in actual["handlers"].values():
        assert callable(import_string(dotted))


# --- 3. Management commands ----------------------------------------------------------------------


def collect_commands() -> dict[str, Any]:
    commands = {}
    project_apps = project_app_names()
    for name, app_name in sorted(get_commands().items()):
        if app_name not in project_apps:
            continue
        parser = load_command_class(app_name, name).create_parser("manage.py", name)
        arguments = [
            {
                "dest": action.dest,
                "option_strings": list(action.option_strings),
                "required": bool(action.required),
                "nargs": action.nargs,
                "action": type(action).__name__,
            }
            for action in parser._actions
            if action.dest not in DJANGO_DEFAULT_DESTS
        ]
        commands[name] = {"app": app_name, "arguments": arguments}
    return commands


def test_management_command_names_and_options_are_frozen() -> None:
    """Commands and their options are called from cron lines, deploy scripts and the runbook."""
    expected = snapshot_load("commands")
    actual = collect_commands()

    assert actual == expected, _diff_dicts(expected, actual)


def _last_line(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert lines, f"{args[0]} printed nothing"
    return lines[-1]


@pytest.mark.django_db
def test_key_and_token_commands_print_the_secret_alone_on_the_last_line() -> None:
    """The acceptance checks and setup scripts take the key or token from the last line of the output."""
    from tests.factories import UserFactory

    key = _last_line("create_integration_key", "generic", "--all-tenants")
    assert re.fullmatch(r"hk_[A-Za-z0-9_-]{43}", key), key

    UserFactory(username="frozen-ops")
    token = _last_line("create_api_token", "frozen-ops", "--label", "frozen names")
    assert re.fullmatch(r"ho_[0-9a-f]{64}", token), token


@pytest.mark.django_db
def test_next_runs_prints_one_iso_instant_per_line() -> None:
    """Scripts read ``next_runs`` line by line: ISO 8601 with the job zone's offset, or UTC with a Z."""
    from tests.factories import JobFactory

    job = JobFactory(schedule="30 2 * * *", timezone="Europe/Berlin")
    after = "2027-03-26T12:00:00+01:00"

    out = StringIO()
    call_command("next_runs", job.schedule, "--tz", job.timezone, "--after", after, "--count", "3", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines == ["2027-03-27T02:30:00+01:00", "2027-03-28T03:00:00+02:00", "2027-03-29T02:30:00+02:00"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", line) for line in lines)

    last_utc = _last_line("next_runs", job.schedule, "--tz", job.timezone, "--after", after, "--utc")
    assert last_utc == "2027-03-27T01:30:00Z"


@pytest.mark.django_db
def test_load_demo_ends_with_the_demo_users_passwords() -> None:
    """``load_demo --demo`` prints each new demo user's password last, once, in a box; a second run says so instead."""
    out = StringIO()
    call_command("load_demo", "--demo", stdout=out)
    *_, last_row, bottom = out.getvalue().splitlines()
    assert re.fullmatch(r"\| admin +[A-Za-z0-9_-]{16} +\|", last_row), last_row
    assert re.fullmatch(r"\+-+\+", bottom) and len(bottom) == len(last_row), bottom

    second = _last_line("load_demo", "--demo")
    assert second == (
        "Demo users already exist; their passwords were printed when they were created "
        "(manage.py load_demo --reset-passwords prints new ones)."
    )


# --- 4. Templates --------------------------------------------------------------------------------


def template_dirs() -> list[Path]:
    dirs = [Path(d) for d in settings.TEMPLATES[0]["DIRS"]]
    dirs += [Path(config.path) / "templates" for config in project_app_configs()]
    return [d for d in dirs if d.is_dir()]


def collect_templates() -> list[str]:
    names = set()
    for directory in template_dirs():
        for path in directory.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.startswith("."):
                names.add(path.relative_to(directory).as_posix())
    return sorted(names)


def test_template_names_are_frozen() -> None:
    """Template names are what ``render()`` calls, ``{% extends %}``/``{% include %}`` and overrides use."""
    expected = snapshot_load("templates")
    actual = collect_templates()

    assert actual == expected, _diff_lists(expected, actual)


def test_every_frozen_template_name_still_resolves() -> None:
    """Finding the file is not enough: the engine must load it under the same name (and it must parse)."""
    unresolved = []
    for name in snapshot_load("templates"):
        try:
            get_template(name)
        except TemplateDoesNotExist:
            unresolved.append(name)
    assert not unresolved, f"templates the engine no longer finds: {unresolved}"


# --- 5. Timeline and alert kinds -----------------------------------------------------------------


class _KindCollector:
    """The strings written to a model's ``kind``, found statically.

    Writers are found by fixed point from the seeds (the model's constructor, ``.objects.create``):
    a function that passes one of its parameters (or its ``**kwargs``) on as a writer's kind is a
    writer too, for that parameter. At each call of a writer the kind argument is resolved to strings:
    literals, f-strings (a ``*`` per placeholder), conditional expressions, names assigned in the
    function or at module level, ``Class.CONSTANT`` and dictionary values (``KINDS[x]``, ``KINDS.get``).
    """

    def __init__(self, model: str, trees: list[tuple[Path, ast.Module]], extra_seeds: Iterable[str] = ()) -> None:
        self.model = model
        self.trees = trees
        # (file, module or function, the calls made in it directly), computed once
        self.scopes = [
            (path, scope, _calls_in(scope))
            for path, tree in trees
            for scope in [tree, *(f for f in ast.walk(tree) if _is_function(f))]
        ]
        self.writers: dict[str, tuple[str, int | None]] = {model: ("kind", None)}
        self.writers[f"{model}.objects.create"] = ("kind", None)
        for seed in extra_seeds:
            self.writers[seed] = ("kind", None)
        self.module_names: dict[Path, dict[str, list[ast.expr]]] = {}
        self.global_names: dict[str, list[ast.expr]] = {}
        self.class_constants: dict[tuple[str, str], ast.expr] = {}
        for path, tree in trees:
            names: dict[str, list[ast.expr]] = {}
            for node in tree.body:
                for target, value in _assignments(node):
                    names.setdefault(target, []).append(value)
                    self.global_names.setdefault(target, []).append(value)
            self.module_names[path] = names
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        for target, value in _assignments(item):
                            self.class_constants[(node.name, target)] = value
        # nested function -> the parameters of the functions enclosing it (closures)
        self.enclosing_params: dict[ast.AST, set[str]] = {}
        for _, tree in trees:
            for outer in (f for f in ast.walk(tree) if _is_function(f)):
                for inner in (n for n in ast.walk(outer) if _is_function(n) and n is not outer):
                    self.enclosing_params.setdefault(inner, set()).update(_all_params(outer))
        self.unresolved: list[str] = []
        self.literals: list[str] = []  # kinds written as a string or an f-string rather than a member

    def _callee(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            if func.attr == "create" and _dotted(func) in {f"{self.model}.objects.create"}:
                return f"{self.model}.objects.create"
            return func.attr
        return None

    def _kind_argument(self, call: ast.Call, callee: str) -> ast.expr | None:
        keyword, index = self.writers[callee]
        for kw in call.keywords:
            if kw.arg == keyword:
                return kw.value
        if index is not None and index < len(call.args):
            return call.args[index]
        return None

    def find_writers(self) -> None:
        # a function's calls include those of the functions nested in it: a closure that writes the
        # enclosing function's parameter as a kind (``on_moved`` callbacks) makes that function a writer
        functions = [
            (
                f,
                _positional_params(f),
                _all_params(f),
                f.args.kwarg.arg if f.args.kwarg else None,
                [n for n in ast.walk(f) if isinstance(n, ast.Call)],
            )
            for _, f, _calls in self.scopes
            if _is_function(f)
        ]
        changed = True
        while changed:
            changed = False
            for function, params, all_params, kwargs_name, calls in functions:
                if function.name in self.writers:
                    continue
                for call in calls:
                    callee = self._callee(call)
                    if callee not in self.writers:
                        continue
                    value = self._kind_argument(call, callee)
                    if isinstance(value, ast.Name) and value.id in all_params:
                        index = params.index(value.id) if value.id in params else None
                        self.writers[function.name] = (value.id, index)
                        changed = True
                        break
                    if value is None and kwargs_name and any(kw.arg is None for kw in call.keywords):
                        self.writers[function.name] = (self.writers[callee][0], None)
                        changed = True
                        break

    def collect(self) -> set[str]:
        self.find_writers()
        kinds: set[str] = set()
        for path, scope, calls in self.scopes:
            params = set() if isinstance(scope, ast.Module) else _all_params(scope)
            forwarded = scope.name if not isinstance(scope, ast.Module) and scope.name in self.writers else None
            for call in calls:
                callee = self._callee(call)
                if callee not in self.writers:
                    continue
                value = self._kind_argument(call, callee)
                if value is None:
                    continue
                if isinstance(value, ast.Name) and value.id in params and forwarded:
                    continue  # a writer passing its own parameter on: resolved at its callers
                if (
                    isinstance(value, ast.Name)
                    and value.id not in params
                    and value.id in self.enclosing_params.get(scope, set())
                ):
                    continue  # a closure writing its enclosing writer's parameter: resolved at its callers
                found = self.resolve(value, path, scope, depth=0)
                if found:
                    kinds |= found
                else:
                    self.unresolved.append(f"{path.relative_to(REPO)}:{call.lineno} {ast.unparse(value)}")
        return kinds

    def resolve(self, node: ast.expr, path: Path, scope: ast.AST, depth: int, member: bool = False) -> set[str]:
        """The strings ``node`` can be; ``member``: reached through an enumeration's member (not a literal)."""
        if depth > 8:
            return set()
        again = lambda n: self.resolve(n, path, scope, depth + 1, member)  # noqa: E731
        if isinstance(node, ast.Constant | ast.JoinedStr) and not member:
            self.literals.append(f"{path.relative_to(REPO)}:{node.lineno} {ast.unparse(node)}")
        if isinstance(node, ast.Constant):
            return {node.value} if isinstance(node.value, str) and node.value else set()
        if isinstance(node, ast.JoinedStr):
            return {
                "".join(
                    str(part.value) if isinstance(part, ast.Constant) else "*"
                    for part in node.values  # a FormattedValue is a placeholder
                )
            }
        if isinstance(node, ast.IfExp):
            return again(node.body) | again(node.orelse)
        if isinstance(node, ast.BoolOp):
            return set().union(*(again(v) for v in node.values))
        if isinstance(node, ast.Tuple):
            return again(node.elts[0]) if node.elts else set()  # a TextChoices member: ("value", "Label")
        if isinstance(node, ast.Name):
            values = _local_assignments(scope, node.id) if not isinstance(scope, ast.Module) else []
            values = values or self.module_names[path].get(node.id) or self.global_names.get(node.id, [])
            return set().union(*(again(v) for v in values)) if values else set()
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name | ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            constant = self.class_constants.get((owner, node.attr))
            if constant is None and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name):
                # ``Model.Kind.MEMBER`` where the model binds ``Kind = _ModelKind``: the member of that class
                alias = self.class_constants.get((node.value.value.id, node.value.attr))
                if isinstance(alias, ast.Name):
                    constant = self.class_constants.get((alias.id, node.attr))
            return self.resolve(constant, path, scope, depth + 1, member=True) if constant is not None else set()
        if isinstance(node, ast.Subscript):
            return self._dict_values(node.value, path, again)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
        ):
            return self._dict_values(node.func.value, path, again) | again(node.args[1])
        return set()

    def _dict_values(self, node: ast.expr, path: Path, again: Any) -> set[str]:
        """The values of a dictionary literal, or of the one a name is bound to (this module's first)."""
        if isinstance(node, ast.Dict):
            return set().union(*(again(v) for v in node.values))
        if isinstance(node, ast.Name):
            for value in self.module_names[path].get(node.id) or self.global_names.get(node.id, []):
                if isinstance(value, ast.Dict):
                    return set().union(*(again(v) for v in value.values))
        return set()


def _is_function(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)


def _positional_params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in [*function.args.posonlyargs, *function.args.args]]


def _all_params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return set(_positional_params(function)) | {a.arg for a in function.args.kwonlyargs}


def _assignments(node: ast.AST) -> list[tuple[str, ast.expr]]:
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [(node.target.id, node.value)]
    return []


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module or function, not descending into nested functions or classes' functions."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not (_is_function(node) or isinstance(node, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _calls_in(scope: ast.AST) -> list[ast.Call]:
    return [node for node in _own_nodes(scope) if isinstance(node, ast.Call)]


def _local_assignments(scope: ast.AST, name: str) -> list[ast.expr]:
    return [value for node in _own_nodes(scope) for target, value in _assignments(node) if target == name]


def collect_kinds() -> dict[str, Any]:
    trees = _parsed_sources()
    timeline = _KindCollector("TimelineEvent", trees)
    timeline_kinds = timeline.collect()
    alert = _KindCollector("Alert", trees, extra_seeds=["ParsedAlert"])
    alert_kinds = alert.collect()
    # every constant of the AlertKind vocabulary, used or not yet, and the field's default
    alert_kinds |= {
        value
        for (owner, _), node in alert.class_constants.items()
        if owner == "AlertKind"
        for value in alert.resolve(node, trees[0][0], trees[0][1], 0, member=True)
    }
    alert_model = apps.get_model("runs", "Alert")
    alert_kinds.add(alert_model._meta.get_field("kind").default)
    return {
        "timeline_event_kinds": sorted(timeline_kinds),
        "alert_kinds": sorted(alert_kinds),
        "unresolved": sorted(timeline.unresolved + alert.unresolved),
        "literals": sorted(timeline.literals + alert.literals),
    }


def test_timeline_and_alert_kind_strings_are_frozen() -> None:
    """Kinds are stored in rows, filtered on and shown by name: one spelled differently splits the history."""
    expected = snapshot_load("kinds")
    actual = collect_kinds()

    for key in ("timeline_event_kinds", "alert_kinds"):
        assert actual[key] == expected[key], f"{key}:\n" + _diff_lists(expected[key], actual[key])
    # Writes whose kind cannot be read statically are frozen by where they are not, so none may appear.
    assert not actual["unresolved"], "kind= values the collector cannot resolve:\n" + "\n".join(actual["unresolved"])


def test_timeline_and_alert_kinds_are_written_as_members_of_their_enumeration() -> None:
    """Writers name a member (``TimelineEvent.Kind.JOB_PAUSED``), never a string, and every kind written is one."""
    actual = collect_kinds()
    assert not actual["literals"], "kinds written as strings, not members:\n" + "\n".join(actual["literals"])
    timeline_event, alert = apps.get_model("runs", "TimelineEvent"), apps.get_model("runs", "Alert")
    # a retired kind stays a member (rows written before still hold it) and is written nowhere
    from runs.timeline.models import RETIRED_KINDS

    assert not set(actual["timeline_event_kinds"]) & RETIRED_KINDS
    assert set(actual["timeline_event_kinds"]) | RETIRED_KINDS == set(timeline_event.Kind.values)
    assert set(actual["alert_kinds"]) == set(alert.Kind.values)


# --- 6. Models -----------------------------------------------------------------------------------


def collect_models() -> dict[str, Any]:
    models = {}
    for config in project_app_configs():
        for model in config.get_models(include_auto_created=True):
            meta = model._meta
            models[f"{meta.app_label}.{meta.object_name}"] = {
                "app_label": meta.app_label,
                "db_table": meta.db_table,
                "model_name": meta.model_name,
            }
    return models


def test_model_app_labels_and_tables_are_frozen() -> None:
    """Tables hold the data; app labels key migrations, content types and permissions (guardian rows)."""
    expected = snapshot_load("models")
    actual = collect_models()

    assert actual == expected, _diff_dicts(expected, actual)


# --- 7. Migrations -------------------------------------------------------------------------------


def migration_files() -> list[Path]:
    from django.db.migrations.loader import MigrationLoader

    files = []
    for config in project_app_configs():
        module_name, _ = MigrationLoader.migrations_module(config.label)
        spec = importlib.util.find_spec(module_name) if module_name else None
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in spec.submodule_search_locations:
            files += [p for p in Path(location).glob("*.py") if p.name != "__init__.py"]
    return sorted(files)


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def collect_migration_references() -> list[str]:
    """Dotted names of project code the migrations use, and each ``RunPython`` function they define."""
    references = set()
    for path in migration_files():
        tree = _parse(path)
        module = ".".join(path.resolve().relative_to(REPO).with_suffix("").parts)
        bound = set()  # names an import binds to project code
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PROJECT_PREFIXES):
                        references.add(alias.name)
                        bound.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PROJECT_PREFIXES):
                for alias in node.names:
                    references.add(f"{node.module}.{alias.name}")
        stack: list[ast.AST] = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Attribute):
                dotted = _dotted(node)
                if dotted and dotted.split(".")[0] in bound and dotted.startswith(PROJECT_PREFIXES):
                    references.add(dotted)
                    continue  # the longest chain only
            if isinstance(node, ast.Call) and _dotted(node.func) in {"migrations.RunPython", "RunPython"}:
                for argument in [*node.args, *(kw.value for kw in node.keywords)]:
                    if isinstance(argument, ast.Name):
                        references.add(f"{module}.{argument.id}")
            stack.extend(ast.iter_child_nodes(node))
    return sorted(references)


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_project_callable_a_migration_references_still_resolves() -> None:
    """Migrations are never edited: the validators and functions they import must stay where they point."""
    expected = snapshot_load("migrations")["references"]
    actual = collect_migration_references()

    assert actual == expected, _diff_lists(expected, actual)
    broken = []
    for dotted in sorted(set(expected) | set(actual)):
        try:
            _resolve(dotted)
        except (ImportError, AttributeError) as exc:
            broken.append(f"{dotted}: {exc!r}")
    assert not broken, "\n".join(broken)


def test_the_migration_graph_and_its_state_still_load() -> None:
    """The graph (dependencies by app label and name) and the state it renders (lazy model references)."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    loader.graph.validate_consistency()
    labels = {config.label for config in project_app_configs()}
    assert labels <= loader.migrated_apps
    leaves = sorted(f"{app}.{name}" for app, name in loader.graph.leaf_nodes() if app in labels)
    assert leaves == snapshot_load("migrations")["leaves"]
    state = loader.project_state()
    assert state.apps.get_model("runs", "TimelineEvent") is not None


# --- 8. OpenAPI ----------------------------------------------------------------------------------


def collect_openapi() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
    operations = sorted(
        [path, method, operation.get("operationId", "")]
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in methods
    )
    return {"operations": operations, "components": sorted(schema.get("components", {}).get("schemas", {}))}


def test_openapi_operations_are_frozen() -> None:
    """Generated clients call operations by path, method and operationId, and name models by component."""
    expected = snapshot_load("openapi")
    actual = collect_openapi()

    assert actual["operations"] == expected["operations"], _diff_lists(expected["operations"], actual["operations"])
    assert actual["components"] == expected["components"], _diff_lists(expected["components"], actual["components"])


# --- regeneration (by hand only; see tests/data/frozen/README.md) ---------------------------------


def collect_migrations() -> dict[str, Any]:
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    labels = {config.label for config in project_app_configs()}
    leaves = sorted(f"{app}.{name}" for app, name in loader.graph.leaf_nodes() if app in labels)
    return {"references": collect_migration_references(), "leaves": leaves}


COLLECTORS = {
    "celery": collect_celery,
    "urls": collect_urls,
    "commands": collect_commands,
    "templates": collect_templates,
    "kinds": collect_kinds,
    "models": collect_models,
    "migrations": collect_migrations,
    "openapi": collect_openapi,
}


def write_snapshots(names: Iterable[str] = ()) -> list[Path]:
    """Write the snapshots (all, or those named) from the code as it is now. Never called by the tests."""
    written = []
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    for name in names or COLLECTORS:
        path = SNAPSHOTS / f"{name}.json"
        path.write_text(snapshot_dump(COLLECTORS[name]()), encoding="utf-8")
        written.append(path)
    return written
