"""A real Locust web UI (no --headless) on a free local port, for the zerohop tab tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.loadgen.conftest import locust_cmd

START_TIMEOUT_S = 120.0  # a cold start imports Locust, numpy and starts the target


@dataclass
class WebUI:
    url: str
    results_dir: Path
    proc: subprocess.Popen[str]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.loads(response.read())

    def post(self, path: str, form: dict[str, str] | None = None) -> Any:
        data = urllib.parse.urlencode(form or {}).encode()
        with urllib.request.urlopen(self.url + path, data=data, timeout=30) as response:
            return json.loads(response.read())

    def log(self) -> str:
        return Path(self.results_dir.parent / "locust.log").read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.25)


@contextmanager
def locust_web_ui(tmp_path: Path, *args: str) -> Iterator[WebUI]:
    """`locust -f loadtests/ <args>` with its web UI; stopped (SIGTERM) at the end."""
    port = free_port()
    results = tmp_path / "results"
    log = open(tmp_path / "locust.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        locust_cmd("--web-host", "127.0.0.1", "--web-port", str(port),
                   "--results-dir", str(results), *args),
        stdout=log, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ui = WebUI(f"http://127.0.0.1:{port}", results, proc)
    try:
        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"locust exited ({proc.returncode}):\n{ui.log()[-3000:]}")
            with urllib.request.urlopen(ui.url + "/", timeout=5) as response:
                return response.status == 200

        wait_for(up, START_TIMEOUT_S, "the Locust web UI to answer")
        yield ui
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
