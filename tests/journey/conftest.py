"""Browser fixtures for the journey: Debian's Chromium (never a downloaded browser), a laptop viewport."""

from __future__ import annotations

import os
from typing import Any

import pytest

# Playwright's sync API keeps an event loop running in the test thread for the rest of the session,
# and Django refuses database calls while a loop runs. The journey (and every test collected after
# it, and the database set-up it may trigger) needs this before Django opens a connection
# (TOOLCHAIN.md); this conftest is imported at collection, before any database is set up.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

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


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch arguments, pointed at Debian's Chromium (TOOLCHAIN.md)."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    """Every person's browser: a 1280×800 laptop screen, English, times shown as the server says."""
    return {**browser_context_args, "viewport": LAPTOP, "locale": "en-GB"}
