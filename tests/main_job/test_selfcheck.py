"""`zerohop selfcheck` and `zerohop run --selfcheck`: the certificate's screen, its bad
input, and real checks against the embedded target, with a negative control.

A quiet PASS is not something a shared 2-core CI machine can promise, so the end-to-end
checks assert the certificate's structure and that its figures are finite and agree
with the run's own records; the negative control (a greenlet that holds the client's
hub, tests/loadgen/client_hog.py) must make the TTFT error jump and the verdict FAIL.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.analysis.certificate_fixtures import OPEN, figures
from zerohop.analysis.client_certificate import Bounds, certificate_document, judge
from zerohop.core.apis import DEFAULT_API
from zerohop.core.layout import SELFCHECK_FILE
from zerohop.runner.plan import RunPlan
from zerohop.runner.selfcheck import run_selfcheck, selfcheck_plan
from zerohop.runner.selfcheck_console import certificate_lines

HOG = Path(__file__).resolve().parents[1] / "loadgen" / "client_hog.py"
RATE = 20.0
DURATION_S = 8


def zerohop(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zerohop", *args], capture_output=True,
                          text=True, timeout=timeout)


def only_folder(root: Path) -> Path:
    folders = [p for p in root.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


def assert_consistent(doc: dict[str, Any], run_dir: Path) -> None:
    """The certificate's shape, finite figures, and figures the records agree with."""
    assert doc["schema"] == "zerohop.selfcheck" and doc["schema_version"] == 1
    assert set(doc) >= {"figures", "bounds", "verdict", "machine", "load"}
    figures, verdict = doc["figures"], doc["verdict"]
    assert verdict["result"] in ("PASS", "FAIL")
    assert (verdict["result"] == "PASS") == (verdict["reasons"] == [])
    assert figures["requests_judged"] >= 50
    for name in ("ttft_error", "e2e_error", "itl_error"):
        stats = figures[name]
        assert all(math.isfinite(stats[k]) for k in ("p50_ms", "p99_ms", "max_ms")), stats
        assert 0 <= stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"]
    assert figures["itl_unpaired_requests"] == 0
    for name in ("schedule_lag_p99_ms", "cpu_us_per_request", "cpu_headroom_pct",
                 "achieved_rps"):
        assert math.isfinite(figures[name]), (name, figures[name])
    assert figures["cpu_us_per_request"] > 0 and figures["cpu_processes"]
    assert verdict["processes_needed"] >= 1
    requests = pd.read_parquet(run_dir / "requests.parquet")
    ok = requests[requests.outcome == "ok"]
    # the client's own error is far below what it measured: TTFT error < the E2E it timed
    assert figures["ttft_error"]["p99_ms"] < ok.e2e_ms.median()
    assert figures["achieved_rps"] == pytest.approx(RATE, rel=0.5)
    assert doc["load"]["mode"] == "open" and doc["load"]["intended_rps"] == RATE
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["client_certificate"]["verdict"] == verdict


# --- the screen ---------------------------------------------------------------------------
@pytest.mark.unit
def test_the_screen_shows_verdict_figures_bounds_and_advice() -> None:
    data = figures(ttft_p99=2.5)
    verdict = judge(data, OPEN, Bounds(), machine_cpus=2)
    doc = certificate_document(data, OPEN, Bounds(), verdict,
                               {"hostname": "box", "cpus": 2, "target_cpus": [1],
                                "client_cpus": [0], "load_avg_1m_before": 0.4},
                               run_id="r", created_at="now")
    for document in (doc, json.loads(json.dumps(doc, default=str))):
        text = "\n".join(certificate_lines(document, "results/x/selfcheck.json"))
        assert text.startswith("zerohop selfcheck: FAIL")
        assert "p99 2.5 ms  (bound ≤ 1 ms)" in text
        assert "open loop, 20 req/s asked" in text
        assert "FAIL          TTFT error p99 2.5 ms > 1 ms" in text
        assert "--workers 0" in text
        assert "target on CPU 1, client on CPU 0" in text
        assert text.endswith("results/x/selfcheck.json")
    assert len(certificate_lines(doc)) <= 20  # one screen


# --- bad input ----------------------------------------------------------------------------
@pytest.mark.integration  # runs the CLI as a child process
@pytest.mark.parametrize("args, words", [
    ([], ["--users", "--rate"]),
    (["--users", "4", "--rate", "2"], ["--users", "--rate"]),
    (["--rate", "-1"], ["--rate"]),
    (["--rate", "5", "--duration", "2s"], ["at least 5s"]),
    (["--rate", "5", "--duration", "soon"], ["--duration"]),
    (["--rate", "5", "--max-error-ms", "0"], ["--max-error-ms"]),
    (["--rate", "5", "--workload", "does/not/exist.yaml"], ["exist.yaml"]),
    (["--rate", "5", "--workers", "-2"], ["--workers"]),
])
def test_bad_input_exits_2_with_one_line(args: list[str], words: list[str],
                                         tmp_path: Path) -> None:
    res = zerohop("selfcheck", "--results-dir", str(tmp_path), *args, timeout=60)
    assert res.returncode == 2, (res.stdout[-500:], res.stderr[-1500:])
    assert "Traceback" not in res.stderr + res.stdout
    assert len(res.stderr.strip().splitlines()) == 1
    for word in words:
        assert word in res.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.integration
def test_run_refuses_selfcheck_with_compare_layer(tmp_path: Path) -> None:
    res = zerohop("run", "--selfcheck", "--compare-layer", "--results-dir", str(tmp_path),
                  timeout=60)
    assert res.returncode == 2 and "--compare-layer" in res.stderr
    assert not any(tmp_path.iterdir())


# --- real checks --------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.slow  # two self-checks of ~15 s each
def test_selfcheck_certifies_and_a_hogged_client_fails(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    res = zerohop("selfcheck", "--rate", f"{RATE:g}", "--duration", f"{DURATION_S}s",
                  "--results-dir", str(tmp_path / "quiet"))
    assert res.returncode in (0, 1), (res.stdout[-2000:], res.stderr[-3000:])
    run_dir = only_folder(tmp_path / "quiet")
    quiet = json.loads((run_dir / SELFCHECK_FILE).read_text())
    print(res.stdout)
    screen = res.stdout[res.stdout.index("zerohop selfcheck: "):]  # after the progress line
    assert screen.startswith(f"zerohop selfcheck: {quiet['verdict']['result']}")
    assert res.returncode == (0 if quiet["verdict"]["result"] == "PASS" else 1)
    assert_consistent(quiet, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())  # as every results folder
    assert summary["total"]["requests"] == len(pd.read_parquet(run_dir / "requests.parquet"))

    # the negative control: the client's hub held 30 ms in every 100 (a token gap is ~7 ms)
    monkeypatch.setenv("ZEROHOP_HOG_HOLD_MS", "30")
    monkeypatch.setenv("ZEROHOP_HOG_CYCLE_MS", "100")
    plan = replace(_rate_plan(tmp_path / "hog"), locustfiles=[HOG])
    hogged = run_selfcheck(plan, default_workload=True)
    print("\n".join(certificate_lines(hogged.certificate)))
    assert_consistent(hogged.certificate, hogged.run_dir)
    hog_ttft = hogged.certificate["figures"]["ttft_error"]["p99_ms"]
    assert hog_ttft > 2.0, hogged.certificate["figures"]["ttft_error"]
    assert hog_ttft > quiet["figures"]["ttft_error"]["p99_ms"]
    assert not hogged.passed
    assert any(r.startswith("TTFT error p99") for r in hogged.certificate["verdict"]["reasons"])


@pytest.mark.integration
@pytest.mark.slow  # a self-check, then the run
def test_run_with_selfcheck_carries_the_certificate_into_folder_and_report(
        tmp_path: Path) -> None:
    workload = Path(__file__).resolve().parents[2] / "workloads" / "short_query_flood.yaml"
    res = zerohop("run", "--workload", str(workload), "--rate", "10", "--duration", "5s",
                  "--selfcheck", "--selfcheck-duration", "6s", "--telemetry", "loadgen",
                  "--microbench", "off", "--results-dir", str(tmp_path), timeout=240)
    assert res.returncode in (0, 1), (res.stdout[-2000:], res.stderr[-3000:])
    assert "zerohop selfcheck: " in res.stdout
    folders = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    check_dir = next(p for p in folders if p.name.endswith("-run-selfcheck"))
    run_dir = next(p for p in folders if p.name.endswith("-run"))
    certificate = json.loads((check_dir / SELFCHECK_FILE).read_text())
    assert json.loads((run_dir / SELFCHECK_FILE).read_text()) == certificate
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["client_certificate"]["run_id"] == check_dir.name
    html = (run_dir / "report.html").read_text()
    assert f"client certificate {certificate['verdict']['result']}" in html


def _rate_plan(results_dir: Path) -> RunPlan:
    intended = RunPlan(host=None, api=DEFAULT_API, workloads=[], classes=[], users=8,
                       rate=RATE, duration_s=DURATION_S, telemetry="loadgen", slo={},
                       name="selfcheck", workers=0, results_dir=results_dir, seed=1234)
    return selfcheck_plan(intended, duration_s=DURATION_S)
