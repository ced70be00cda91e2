"""gunicorn settings for Handover's web processes (read from the working directory: ``gunicorn`` with no
``-c`` picks up ``./gunicorn.conf.py``; command-line flags such as ``--workers`` still win).

Sync workers serve one request at a time, so a client that sends its body slowly -- or never ends a
chunked body -- holds a worker for as long as gunicorn lets it. Three bounds (docs/production.md,
"Request buffering and worker timeouts"):

- ``pre_request`` puts a read timeout on the client's socket (``HANDOVER_BODY_READ_TIMEOUT_SECONDS``,
  default 10): a body that stalls longer fails to read, and the ingestion endpoint stores the post
  ``rejected`` and answers 400 (``runs/alerts/receive_api.py``) instead of waiting;
- ``timeout``: a worker silent for longer (a body trickled byte by byte, a stuck request) is killed
  and replaced by the master;
- the request line and header limits refuse oversized heads before any Django code runs.

In production a buffering proxy in front (nginx ``proxy_request_buffering on``, its default, with
``client_body_timeout``) reads the whole body before gunicorn sees the request, so none of this is
reached in normal operation; these settings are the floor when it is missing.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from handover.env import env

wsgi_app = "handover.wsgi:application"
bind = env.str("HANDOVER_BIND", default="0.0.0.0:8000")
# Requests are CPU-bound (docs/production.md, "What scales how"): about two workers per core.
workers = env.int("HANDOVER_WEB_WORKERS", default=2 * multiprocessing.cpu_count())
worker_class = "sync"

# A worker that has not answered in this many seconds is killed and replaced (the master's watchdog).
timeout = 30
# On a reload (HUP) or stop, workers get this long to finish the request at hand.
graceful_timeout = 30
# Between requests on one connection (behind a proxy that keeps connections open).
keepalive = 5

# Refuse oversized request heads outright (gunicorn's defaults, stated: the body limit is the app's,
# HANDOVER_MAX_BODY_BYTES).
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190

# URL keys travel in the ingestion address (/api/v1/alerts/<source>/k/<key>/): the access log masks them.
logger_class = "handover.core.access_log.UrlKeyMaskingLogger"

BODY_READ_TIMEOUT_SECONDS = env.float("HANDOVER_BODY_READ_TIMEOUT_SECONDS", default=10.0)


def pre_request(worker: Any, req: Any) -> None:
    """Give the client's socket a read timeout before the application reads the body.

    gunicorn's sync worker reads the body lazily from a blocking socket; without a timeout, a chunked
    body that never ends blocks until ``timeout`` kills the worker. With it, a read that waits longer
    than ``BODY_READ_TIMEOUT_SECONDS`` raises ``TimeoutError`` (an ``OSError``) inside
    ``wsgi.input.read``. The socket is reached through gunicorn's request reader; a gunicorn without
    it (another worker class) keeps its own behaviour.
    """
    sock = getattr(getattr(req, "unreader", None), "sock", None)
    if sock is not None and hasattr(sock, "settimeout"):
        sock.settimeout(BODY_READ_TIMEOUT_SECONDS)
