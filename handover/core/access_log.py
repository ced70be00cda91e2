"""URL keys never reach a log: the ingestion address ``/api/v1/alerts/<source>/k/<key>/`` is masked.

A URL key is a credential in the request path (docs/integrations/transport.md), and paths are what
access logs and Django's request warnings print. Two places print them, both masked here:

- gunicorn's access log: ``UrlKeyMaskingLogger``, set as ``logger_class`` in ``gunicorn.conf.py``,
  masks every atom of the access-log line (request line, path, query, environ values, headers such as
  a ``Referer`` that repeats the address);
- Python logging (Django's ``django.request`` "Unauthorized: /api/v1/…" warnings, ``runserver``'s
  ``django.server`` lines): ``UrlKeyMaskFilter`` on the console handler (``LOGGING`` in settings).

The key becomes ``‹url-key›``; the source and the rest of the path stay, so the log still says which
integration's address was posted to.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from gunicorn.glogging import Logger  # type: ignore[import-untyped]  # gunicorn ships no type hints

URL_KEY_IN_PATH = re.compile(r"(/api/v1/alerts/[^/\s?#]+/k/)[^/\s?#\"']+")
MASK = "‹url-key›"


def mask_url_keys(text: str) -> str:
    """Replace the key segment of every ingestion address in ``text`` with ``‹url-key›``."""
    return URL_KEY_IN_PATH.sub(lambda m: m.group(1) + MASK, text)


def _masked(value: Any) -> Any:
    return mask_url_keys(value) if isinstance(value, str) else value


class UrlKeyMaskingLogger(Logger):  # type: ignore[misc]  # gunicorn ships no type hints
    """gunicorn's logger whose access-log atoms have URL keys masked (``mask_url_keys``)."""

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        """gunicorn's atoms, every text value masked."""
        return {name: _masked(value) for name, value in super().atoms(resp, req, environ, request_time).items()}


class UrlKeyMaskFilter(logging.Filter):
    """A logging filter masking URL keys in a record's message and arguments (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the message and its %-arguments in place; always keep the record."""
        record.msg = _masked(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _masked(v) for k, v in record.args.items()}
        return True
