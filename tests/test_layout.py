"""The code's map (docs/architecture.md): one folder per sub-domain, no re-export façades, no private imports.

These read the source tree as text; they import nothing from the apps.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APPS = ("runs", "approvals", "handover")

# Modules an app may keep at its top level (Django's and Celery's conventions, the project package).
APP_LEVEL = {"__init__.py", "apps.py", "urls.py", "api_urls.py", "admin.py", "tasks.py"}
HANDOVER_PROJECT_FILES = {"settings.py", "urls.py", "app_urls.py", "celery.py", "wsgi.py", "env.py"}
# Folders that are not slices but Django's own places.
DJANGO_FOLDERS = {"migrations", "management", "templatetags", "models"}
# The one module docs/architecture.md places at the app's top level: who may do what (one predicate per rule).
RUNS_TOP_LEVEL = {"permissions.py"}


def _python_files(app: str) -> list[Path]:
    return sorted(p for p in (REPO / app).rglob("*.py") if "__pycache__" not in p.parts)


def _outside_slices(app: str) -> list[str]:
    allowed = APP_LEVEL | (HANDOVER_PROJECT_FILES if app == "handover" else set())
    allowed |= RUNS_TOP_LEVEL if app == "runs" else set()
    stray = []
    for path in _python_files(app):
        parts = path.relative_to(REPO / app).parts
        if len(parts) == 1 and parts[0] not in allowed:
            stray.append(str(path.relative_to(REPO)))
    return stray


def test_every_module_lives_in_a_slice_folder() -> None:
    """A module at an app's top level is one of Django's, Celery's or the project's; the rest is in a slice."""
    stray = [module for app in APPS for module in _outside_slices(app)]

    assert stray == []


def test_no_init_module_re_exports_anything() -> None:
    """``__init__.py`` files are empty, but ``models/__init__.py`` (Django's registry) and the project package's."""
    allowed = {REPO / "handover" / "__init__.py"}  # imports the Celery app, as Celery's Django guide asks
    full = []
    for app in APPS:
        for path in _python_files(app):
            if path.name != "__init__.py" or path in allowed or path.parent.name == "models":
                continue
            if path.read_text().strip():
                full.append(str(path.relative_to(REPO)))

    assert full == []


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_imports_another_modules_private_name() -> None:
    """A name that starts with ``_`` is private to its module: another module that needs it gets a public name."""
    found = []
    for top in (*APPS, "tests", "bench"):
        for path in sorted((REPO / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                    continue
                if node.module.split(".")[0] not in APPS or node.module == _module_name(path):
                    continue
                found += [
                    f"{path.relative_to(REPO)}:{node.lineno} {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]

    assert found == []


def test_templates_follow_the_slices() -> None:
    """Templates sit in ``templates/<app>/<slice>/``; only the shared ones at the top or in Django's folders."""
    shared = {"base.html"}
    django_folders = {"registration", "drf_spectacular"}
    stray = []
    for path in sorted((REPO / "templates").rglob("*")):
        if not path.is_file():
            continue
        parts = path.relative_to(REPO / "templates").parts
        if len(parts) == 1 and parts[0] in shared or parts[0] in django_folders:
            continue
        if len(parts) < 3 or parts[0] not in APPS:
            stray.append("/".join(parts))

    assert stray == []


# What the runs app may import of the handover package: its shared core and the project's own files
# (settings, URLs, Celery app, environment). Everything else of the handover app, and the approvals
# app, depends on runs -- never the other way (docs/architecture.md "Layout rules": an outbox instead).
RUNS_MAY_IMPORT_FROM_HANDOVER = (
    "handover.core",
    "handover.settings",
    "handover.urls",
    "handover.api_urls",
    "handover.app_urls",
    "handover.celery",
    "handover.wsgi",
    "handover.env",
)


def _imported_modules(tree: ast.Module) -> list[tuple[int, str]]:
    """Every module an import statement names (at any depth: lazy imports inside functions count too)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            # ``from handover import settings`` names the module through the alias
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names if node.module == "handover"]
    return found


def test_runs_imports_from_handover_only_its_core_and_the_project_files_and_nothing_from_approvals() -> None:
    wrong = []
    for path in _python_files("runs"):
        if "migrations" in path.relative_to(REPO).parts:
            continue
        for line, module in _imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            top = module.split(".")[0]
            if module == "handover" or top not in ("handover", "approvals"):
                continue  # ``from handover import x``: x is checked on its own
            if top == "handover" and any(
                module == m or module.startswith(f"{m}.") for m in RUNS_MAY_IMPORT_FROM_HANDOVER
            ):
                continue
            wrong.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert wrong == [], "runs reaches into the other apps:\n" + "\n".join(wrong)


# The one place a service's Forbidden becomes the page's PermissionDenied (``refusals``).
REFUSAL_RELAY = "handover/core/views.py"


def _is_page_or_api_module(path: Path) -> bool:
    """A module answering requests: ``views.py``, ``*_views.py``, ``api.py``, ``*_api.py``."""
    stem = path.stem
    return stem in ("views", "api") or stem.endswith(("_views", "_api"))


def self_refusals(source: str) -> list[tuple[int, str]]:
    """Where a module refuses on its own: ``raise PermissionDenied(...)`` (Django's or DRF's) and
    classes deriving from DRF's ``BasePermission``, as (line, what)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == "PermissionDenied":
                found.append((node.lineno, "raise PermissionDenied"))
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name == "BasePermission":
                    found.append((node.lineno, f"class {node.name}(BasePermission)"))
    return sorted(found)


def test_self_refusals_finds_a_raise_and_a_permission_class() -> None:
    source = (
        "from django.core.exceptions import PermissionDenied\n"
        "def v(request):\n    if not request.user.is_staff:\n        raise PermissionDenied('no')\n"
        "class CanRead(permissions.BasePermission):\n    pass\n"
    )
    assert self_refusals(source) == [(4, "raise PermissionDenied"), (5, "class CanRead(BasePermission)")]


def test_pages_and_the_api_refuse_only_through_a_service() -> None:
    """Every refusal comes from a service or selector (``runs.permissions`` holds the rules): a page
    relays a Forbidden through ``handover.core.views.refusals``, the API through the exception handler.
    No view or API module raises PermissionDenied or writes a DRF permission class of its own (DRF's
    ``IsAuthenticated`` / ``IsAdminUser`` and Django's staff decorator are the framework's gates)."""
    wrong = []
    for app in APPS:
        for path in _python_files(app):
            relative = str(path.relative_to(REPO))
            if relative == REFUSAL_RELAY or not _is_page_or_api_module(path):
                continue
            wrong += [f"{relative}:{line} {what}" for line, what in self_refusals(path.read_text(encoding="utf-8"))]
    assert wrong == [], "pages or API modules refusing on their own:\n" + "\n".join(wrong)
