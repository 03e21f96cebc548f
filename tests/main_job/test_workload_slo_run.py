"""A workload file's `slo:` reaches the run: recorded per workload in the manifest,
judged on that workload's requests, its goodput counted against it; `--slo` replaces it
and is the one that sets the exit code (docs/slo.md, "Whose objectives")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.main_job.test_run_command import zerohop

pytestmark = pytest.mark.integration  # real `zerohop run`s against the embedded target

WORKLOADS = """\
workloads:
  - kind: short_query_flood
    name: strict
    input_tokens: 16
    max_tokens: 4
    load: {kind: closed, users: 1}
    slo: {ttft_p50_ms: 0.001}
  - kind: short_query_flood
    name: relaxed
    input_tokens: 16
    max_tokens: 4
    load: {kind: closed, users: 1}
"""


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    wl = tmp_path / "slo.yaml"
    wl.write_text(WORKLOADS)
    res = zerohop("run", "--workload", str(wl), "--duration", "6s", "--users", "2",
                  "--no-report", "--results-dir", str(tmp_path / "r"), *extra)
    [run_dir] = (tmp_path / "r").iterdir()
    return res.returncode, json.loads((run_dir / "manifest.json").read_text())


def test_a_workloads_slo_judges_it_and_is_recorded(tmp_path: Path) -> None:
    code, manifest = _run(tmp_path)
    assert manifest["workload_slo"] == {"strict": {"ttft_p50_ms": 0.001}}
    verdict = manifest["slo_verdict"]
    [result] = verdict["results"]
    assert (result["slo"], result["workload"], result["met"]) == ("strict: ttft_p50_ms",
                                                                  "strict", False)
    assert verdict["workloads_failed"] is True and verdict["failed"] is False
    assert code == 0  # a workload's own objectives are shown, not a gate


def test_the_runs_slo_replaces_the_workloads_and_gates(tmp_path: Path) -> None:
    code, manifest = _run(tmp_path, "--slo", "ttft_p50_ms=0.001")
    verdict = manifest["slo_verdict"]
    assert [(r["slo"], r["workload"]) for r in verdict["results"]] == [("ttft_p50_ms", None)]
    assert verdict["failed"] is True
    assert code == 1
