"""gunicorn.conf.py: a body that never ends does not hold a sync worker (docs/production.md, "Request
buffering and worker timeouts"). A real gunicorn, with the repository's configuration, serves a probe
application that reads the body as the ingestion endpoint does."""

from __future__ import annotations

import os
import runpy
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "gunicorn.conf.py"


def probe_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Read the whole body in chunks, as ``runs/alerts/receive_api.py`` does; 400 naming the error if it fails."""
    stream = environ["wsgi.input"]
    size = 0
    try:
        while chunk := stream.read(64 * 1024):
            size += len(chunk)
    except OSError as exc:
        start_response("400 Bad Request", [("Content-Type", "text/plain")])
        return [f"unreadable: {type(exc).__name__} after {size} bytes".encode()]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"read {size} bytes".encode()]


def test_the_configuration_bounds_workers_and_request_heads() -> None:
    conf = runpy.run_path(str(CONF))

    assert conf["wsgi_app"] == "handover.wsgi:application" and conf["worker_class"] == "sync"
    assert 0 < conf["timeout"] <= 30 and 0 < conf["graceful_timeout"] <= 30
    assert conf["limit_request_line"] <= 4094 and conf["limit_request_field_size"] <= 8190
    assert 0 < conf["BODY_READ_TIMEOUT_SECONDS"] < conf["timeout"]
    assert callable(conf["pre_request"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def gunicorn_probe() -> Iterator[int]:
    """One sync worker of the repository's configuration serving ``probe_app``; yields its port."""
    port = _free_port()
    env = {**os.environ, "HANDOVER_BODY_READ_TIMEOUT_SECONDS": "1"}
    command = [
        sys.executable, "-m", "gunicorn", "-c", str(CONF), "--workers", "1",
        "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "tests.test_gunicorn:probe_app",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("gunicorn did not start: " + (process.stderr.read().decode() if process.stderr else ""))
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def _request(port: int, raw: bytes, *, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return answer


def test_an_unterminated_chunked_body_is_cut_off_and_frees_the_worker(gunicorn_probe: int) -> None:
    head = b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    started = time.monotonic()

    stalled = _request(gunicorn_probe, head + b"5\r\nhello\r\n", timeout=10)  # no terminating chunk

    assert stalled.startswith(b"HTTP/1.1 400") and b"unreadable: TimeoutError" in stalled
    assert time.monotonic() - started < 5  # the read timeout (1 s here), not the worker timeout (30 s)
    # the one worker is free again
    complete = _request(gunicorn_probe, head + b"5\r\nhello\r\n0\r\n\r\n", timeout=10)
    assert complete.startswith(b"HTTP/1.1 200") and b"read 5 bytes" in complete
