"""The one environment reader: ``env`` (django-environ, file-aware: ``NAME`` or ``NAME_FILE``)."""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.FileAwareEnv()
env.smart_cast = False
