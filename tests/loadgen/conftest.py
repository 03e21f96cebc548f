"""Helpers to run real Locust processes against the embedded target."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOADTESTS = REPO / "loadtests"


def locust_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOADTESTS), *args]


def run_locust(args: list[str], *, timeout: float = 180, cwd: Path | None = None
               ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(locust_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env)


def locust_final_stats(json_file_prefix: Path) -> dict[tuple[str, str], dict]:
    """Locust's own final request stats, written by `--json-file` at shutdown: keyed by
    (request type, name). Its `--csv` stats file is refreshed once a second and not at
    shutdown, so it can miss the requests that the end-of-run drain completed."""
    entries = json.loads(Path(f"{json_file_prefix}.json").read_text())
    return {(e["method"], e["name"]): e for e in entries}


def only_run_dir(results_dir: Path) -> Path:
    runs = [p for p in results_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture()
def workload_file(tmp_path: Path):
    def write(text: str, name: str = "w.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
