"""Shared helpers for the reliability suite: real processes, ground truth, scans.

Every helper starts processes in their own session and the tests stop them by pid,
so nothing outlives a test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOADTESTS = REPO / "loadtests"
MODEL = "llama-3-8b"  # accepted alias of the sim's default served model

FLOOD_WORKLOAD = """
kind: short_query_flood
name: flood
input_tokens: 32
max_tokens: {max_tokens}
load: {{kind: closed, users: {users}}}
"""


def child_env(**extra: str) -> dict[str, str]:
    """The test process's environment, unbuffered, plus `extra`."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", **extra}


def locust_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOADTESTS), *args]


def zerohop_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "zerohop", *args]


def run(cmd: list[str], *, timeout: float = 120, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=env or child_env(), cwd=cwd)


def start(cmd: list[str], *, env: dict[str, str] | None = None, log: Path | None = None,
          ) -> subprocess.Popen[str]:
    """A child in its own session, output to `log` (or a pipe), with SIGINT at its
    default as a terminal's Ctrl-C finds it: a test run started in the background of
    a non-interactive shell ignores SIGINT, every child inherits that, and a Python
    that starts with SIGINT ignored keeps ignoring it."""
    out = open(log, "w") if log is not None else subprocess.PIPE  # noqa: SIM115
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True,
                            env=env or child_env(), start_new_session=True,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL what is left of a child's session (cleanup after a failed assertion)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def only_run_dir(results_dir: Path) -> Path:
    runs = [p for p in results_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def read_jsonl(path: Path) -> list[dict[str, object]]:
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a kill
    return rows


def wait_for(predicate, timeout: float, interval: float = 0.1) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def files_under(*roots: Path) -> Iterator[Path]:
    for root in roots:
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from (p for p in root.rglob("*") if p.is_file())


@pytest.fixture()
def workload_file(tmp_path: Path):  # type: ignore[no-untyped-def]
    def write(text: str, name: str = "w.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
