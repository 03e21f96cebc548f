"""A Locust worker that fails at set-up, or dies mid-run, fails the run loudly: exit
code 5, the manifest says `partial` and which worker and why, the report says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.loadgen.conftest import only_run_dir
from tests.loadgen.failing_worker import failing_worker_locustfile
from tests.loadgen.web_ui import free_port

pytestmark = pytest.mark.integration  # real Locust processes and the embedded target

EXIT_WORKER_FAILED = 5

WORKLOAD = ("kind: short_query_flood\nname: flood\ninput_tokens: 16\nmax_tokens: 8\n"
            "load: {kind: closed, users: 4}\n")


@pytest.mark.parametrize("how, reason", [
    ("raise", "failed at test start: injected set-up failure"),
    ("crash", "stopped answering (no heartbeat)"),
])
def test_a_failed_worker_makes_the_run_partial(how: str, reason: str, tmp_path: Path) -> None:
    files = tmp_path / "locustfiles"
    files.mkdir()
    (files / "flood.py").write_text(failing_worker_locustfile(how))
    workload = tmp_path / "flood.yaml"
    workload.write_text(WORKLOAD)
    port = str(free_port())  # not Locust's 5557: another test's master may hold it
    res = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(files), "--headless", "--processes", "2",
         "--master-bind-port", port, "--master-port", port, "-u", "4", "-r", "4", "-t",
         "10s", "--stop-timeout", "5", "--workload", str(workload),
         "--results-dir", str(tmp_path / "r"), "--telemetry", "none"],
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert res.returncode == EXIT_WORKER_FAILED, res.stderr[-3000:]
    run = only_run_dir(tmp_path / "r")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    (failed,) = manifest["workers_failed"]
    assert failed["worker_index"] == 1 and reason in failed["reason"], failed
    assert f"worker 1 {reason}" in manifest["end_reason"]
    # the worker that stayed measured, and the records say who did
    df = pd.read_parquet(run / "requests.parquet")
    assert len(df) > 0 and (df.outcome == "ok").any()
    report = subprocess.run([sys.executable, "-m", "zerohop", "report", str(run)],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "run status: partial" in (run / "report.html").read_text()
