"""Browser fixtures for the journey: Debian's Chromium (never a downloaded browser), a laptop viewport.

Playwright's sync API keeps an event loop running in the test thread from the moment it starts until
it stops, and Django refuses database calls while a loop runs in the thread (``SynchronousOnlyOperation``).
So, for the journey only: Playwright (and the browser) live for each journey module instead of the
whole session, and ``DJANGO_ALLOW_ASYNC_UNSAFE`` is set while they do and restored afterwards
(docs/production.md, "Toolchain facts"). Tests collected after the journey run without a loop and
without the escape hatch, so an async-unsafe database call anywhere else is still caught.

Module scope, not package scope: ``tests/`` has no ``__init__.py`` files, and pytest keeps a
"package" fixture of a plain directory until the end of the session.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserType, Playwright, sync_playwright

ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
LAPTOP = {"width": 1280, "height": 800}


@pytest.fixture(scope="module", autouse=True)
def django_allow_async_unsafe() -> Iterator[None]:
    """Let Django query while Playwright's loop runs in this thread, for the journey tests only.

    Module-scoped and autouse, so it is set up before the module's Playwright and torn down after
    it has stopped; the variable is then restored to what it was (usually unset). Django reads it at
    each database call, so setting it here (not at import) is enough.
    """
    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous


# pytest-playwright's own ``playwright``, ``browser_type``, ``launch_browser`` and ``browser`` are
# session-scoped: its loop would outlive the journey. These module-scoped ones replace them here.


@pytest.fixture(scope="module")
def playwright(_pw_api_request_contexts: Any) -> Iterator[Playwright]:
    """Playwright for one journey module (its event loop stops with it); traced as the plugin's is."""
    pw = sync_playwright().start()
    if _pw_api_request_contexts:
        _pw_api_request_contexts.instrument(pw)
    yield pw
    pw.stop()


@pytest.fixture(scope="module")
def browser_type(playwright: Playwright, browser_name: str) -> BrowserType:
    return getattr(playwright, browser_name)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def launch_browser(browser_type_launch_args: dict[str, Any], browser_type: BrowserType) -> Callable[..., Browser]:
    """Launch the local browser with the launch arguments below (the journey never connects to a remote one)."""

    def launch(**kwargs: Any) -> Browser:
        return browser_type.launch(**{**browser_type_launch_args, **kwargs})

    return launch


@pytest.fixture(scope="module")
def browser(launch_browser: Callable[..., Browser]) -> Iterator[Browser]:
    launched = launch_browser()
    yield launched
    launched.close()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch arguments, pointed at Debian's Chromium (docs/production.md, "Toolchain facts")."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="module")
def browser_context_args(pytestconfig: pytest.Config, _pw_artifacts_folder: Any) -> dict[str, Any]:
    """Every person's browser: a 1280×800 laptop screen, English, times shown as the server says.

    Replaces the plugin's fixture instead of extending it: that one asks for the session-wide
    Playwright (for ``--device``, which the journey does not use). ``--video`` is honoured as there.
    """
    args: dict[str, Any] = {"viewport": LAPTOP, "locale": "en-GB"}
    if pytestconfig.getoption("--video") in ("on", "retain-on-failure"):
        args["record_video_dir"] = _pw_artifacts_folder.name
    return args
