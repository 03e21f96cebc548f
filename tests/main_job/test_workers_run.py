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

pytestmark = pytest.mark.integration  # `zerohop run`, Locust processes, embedded target

EXIT_WORKER_FAILED = 5
ALL_DEFAULTS = {"short_query_flood", "long_context", "lora_mix", "trace_replay_azure_conv"}


def _only_run(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


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
    run = _only_run(tmp_path / "r")
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

LOCUSTFILE = '''
from locust import events
from locust.runners import WorkerRunner

from zerohop.loadgen import hooks
from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class ShortQueryFlood(LLMUser):
    workload_kind = "short_query_flood"
    default_workload_file = "short_query_flood.yaml"


_prepare = hooks._prepare_bindings


def _failing_in_worker_1(environment):
    if isinstance(environment.runner, WorkerRunner) and environment.runner.worker_index == 1:
        raise RuntimeError("injected set-up failure")
    _prepare(environment)


hooks._prepare_bindings = _failing_in_worker_1
'''


def test_a_failed_worker_fails_zerohop_run_loudly(tmp_path: Path) -> None:
    files = tmp_path / "locustfiles"
    files.mkdir()
    (files / "flood.py").write_text(LOCUSTFILE)
    res = subprocess.run([sys.executable, "-c", RUN_WITH_A_FAILING_WORKER, str(files), "run",
                          "--workers", "2", "--duration", "8s", "--only", "ShortQueryFlood",
                          "--results-dir", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert res.returncode == EXIT_WORKER_FAILED, (res.stdout[-2000:], res.stderr[-3000:])
    assert "Traceback" not in res.stdout + res.stderr
    assert ("zerohop: PARTIAL RUN: worker 1 failed at test start: injected set-up failure"
            in res.stderr)
    run = _only_run(tmp_path / "r")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    assert [f["worker_index"] for f in manifest["workers_failed"]] == [1]
    assert "run status: partial" in (run / "report.html").read_text()
