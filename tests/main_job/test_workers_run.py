"""`zerohop run --workers 2`: master and workers run the same workloads, and a worker
that fails is the run's failure (exit 5, a PARTIAL RUN line), not a quiet shortfall."""

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

pytestmark = pytest.mark.integration  # `zerohop run`, Locust processes, embedded target

EXIT_WORKER_FAILED = 5
ALL_DEFAULTS = {"short_query_flood", "long_context", "lora_mix", "trace_replay_azure_conv"}


def test_two_workers_run_all_four_defaults_without_public_traces(tmp_path: Path) -> None:
    """As on a fresh clone with no ../shared/traces: every default workload runs, on both
    workers (a worker once ran a workload its master had left out, and died)."""
    env = {**os.environ, "ZEROHOP_TRACES": str(tmp_path / "no-public-traces")}
    res = subprocess.run([sys.executable, "-m", "zerohop", "run", "--workers", "2",
                          "--duration", "8s", "--no-report", "--results-dir",
                          str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "left out" not in res.stderr
    run = only_run_dir(tmp_path / "r")
    df = pd.read_parquet(run / "requests.parquet")
    assert set(df.workload) == ALL_DEFAULTS
    assert df.worker.nunique() == 2
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed" and "workers_failed" not in manifest


# `zerohop run` with its locustfiles swapped for one whose worker 1 fails at set-up
RUN_WITH_A_FAILING_WORKER = '''
import sys
from pathlib import Path

import zerohop.shipped

folder = Path(sys.argv.pop(1))
zerohop.shipped.loadtests_dir = lambda: folder
from zerohop.cli import main

main()
'''

def test_a_failed_worker_fails_zerohop_run_loudly(tmp_path: Path) -> None:
    files = tmp_path / "locustfiles"
    files.mkdir()
    (files / "flood.py").write_text(failing_worker_locustfile("raise"))
    res = subprocess.run([sys.executable, "-c", RUN_WITH_A_FAILING_WORKER, str(files), "run",
                          "--workers", "2", "--duration", "8s", "--only", "ShortQueryFlood",
                          "--results-dir", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert res.returncode == EXIT_WORKER_FAILED, (res.stdout[-2000:], res.stderr[-3000:])
    assert "Traceback" not in res.stdout + res.stderr
    assert ("zerohop: PARTIAL RUN: worker 1 failed at test start: injected set-up failure"
            in res.stderr)
    run = only_run_dir(tmp_path / "r")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    assert [f["worker_index"] for f in manifest["workers_failed"]] == [1]
    assert "run status: partial" in (run / "report.html").read_text()
