"""The console says what the report's first screen says: client-fidelity flags, dropped
arrivals, and on a missed SLO whether it sets the exit code."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from zerohop.analysis.run_analysis import analyse_run
from zerohop.analysis.run_data import RunData, frame_from_rows
from zerohop.runner.console_summary import print_summary, slo_verdict

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0


def _analysis(manifest: dict[str, Any], lag_ms: float) -> Any:
    rows = [{
        "workload": "flood", "outcome": "ok", "scheduled_ts": T0 + i * 0.1,
        "sent_ts": T0 + i * 0.1 + lag_ms / 1e3, "end_ts": T0 + i * 0.1 + 0.3,
        "schedule_lag_ms": lag_ms, "ttft_ms": 120.0 + i, "e2e_ms": 300.0, "tpot_ms": 5.0,
        "input_tokens": 100, "output_tokens": 16, "itl_ms": [5.0] * 15,
    } for i in range(100)]
    frame, itl = frame_from_rows(rows)
    telemetry = pd.DataFrame({"ts": [], "source": [], "metric": [], "labels": [], "value": []})
    run = RunData(run_dir=Path("/nonexistent"), manifest=manifest, requests=frame, itl=itl,
                  telemetry=telemetry, microbench=None, requests_source="jsonl")
    return analyse_run(run)


def _manifest(**fields: Any) -> dict[str, Any]:
    return {"run_id": "synthetic", "status": "completed", "slo": {},
            "load": {"mode": "open", "duration_s": 10.0},
            "counters": {"sent": 100, "dropped_arrivals": 13}, **fields}


def _console(analysis: Any, capsys: pytest.CaptureFixture[str]) -> str:
    print_summary(analysis, slo_verdict(analysis))
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_fidelity_flags_and_dropped_arrivals_reach_the_console(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _console(_analysis(_manifest(), lag_ms=11.7), capsys)
    assert "zerohop: warning: client fidelity flagged: schedule lag p99 11.7 ms" in out, out
    assert "zerohop: warning: dropped arrivals: 13" in out, out


def test_a_clean_run_warns_of_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    manifest = _manifest(counters={"sent": 100, "dropped_arrivals": 0})
    assert "warning" not in _console(_analysis(manifest, lag_ms=0.5), capsys)


def test_a_missed_slo_says_whether_it_gates_the_exit_code(
        capsys: pytest.CaptureFixture[str]) -> None:
    workload_slo = _manifest(workload_slo={"flood": {"ttft_p99_ms": 100.0}})
    out = _console(_analysis(workload_slo, lag_ms=0.5), capsys)
    line = next(line for line in out.splitlines() if "MISSED" in line)
    assert "not gating the exit code" in line and "--slo gates" in line, line
    assert "observed 218 ms" in line, line  # rounded for people, not 218.01000000000002
    gated = _manifest(slo={"ttft_p99_ms": 100.0})
    out = _console(_analysis(gated, lag_ms=0.5), capsys)
    line = next(line for line in out.splitlines() if "MISSED" in line)
    assert "(--slo: exit 1)" in line, line


def test_a_percentile_judged_on_too_few_requests_says_so_as_the_report_does(
        capsys: pytest.CaptureFixture[str]) -> None:
    """p99.9 of 100 requests is their largest value: the gate judges it and the line
    says to read it so (the report's SLO table says the same); p99 of 100 needs no note."""
    out = _console(_analysis(_manifest(slo={"ttft_p999_ms": 500.0, "ttft_p99_ms": 500.0}),
                             lag_ms=0.5), capsys)
    lines = [line for line in out.splitlines() if line.startswith("SLO ")]
    tail = next(line for line in lines if "p99.9" in line or "p999" in line)
    assert tail.endswith("(p99.9 of fewer than 1,000 requests: read it as the max)"), tail
    assert next(line for line in lines if "ttft_p99_ms" in line).endswith("met"), lines


def test_the_reports_first_screen_counts_dropped_arrivals() -> None:
    from zerohop.report.present_headline import verdict

    checks = verdict(_analysis(_manifest(), lag_ms=0.5))["checks"]
    assert any(c["text"].startswith("dropped arrivals: 13") and c["status"] == "warn"
               for c in checks), checks


def _console_row(out: str, workload: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith(workload)).split()


@pytest.mark.parametrize("n", [5, 15, 99, 100, 250])
def test_the_console_prints_a_percentile_only_where_its_sample_holds_it(
        n: int, capsys: pytest.CaptureFixture[str]) -> None:
    """p99 of 5 or 15 requests is the largest one, not a 99th percentile: the console
    shows "-" there, as the report does, and the value (recomputed here with a plain
    linear-interpolation quantile) from 100 requests on."""
    rows = [{
        "workload": "flood", "outcome": "ok", "scheduled_ts": T0 + i * 0.1,
        "sent_ts": T0 + i * 0.1, "end_ts": T0 + i * 0.1 + 0.3, "schedule_lag_ms": 0.1,
        "ttft_ms": 10.0 + (i * 37) % n, "e2e_ms": 300.0 + i, "tpot_ms": 5.0,
        "input_tokens": 100, "output_tokens": 16, "itl_ms": [5.0] * 15,
    } for i in range(n)]
    frame, itl = frame_from_rows(rows)
    telemetry = pd.DataFrame({"ts": [], "source": [], "metric": [], "labels": [], "value": []})
    run = RunData(run_dir=Path("/nonexistent"), manifest=_manifest(), requests=frame, itl=itl,
                  telemetry=telemetry, microbench=None, requests_source="jsonl")
    cells = _console_row(_console(analyse_run(run), capsys), "flood")
    ttft_p50, ttft_p99, e2e_p99 = cells[6], cells[7], cells[9]

    def quantile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        pos = q * (len(ordered) - 1)
        low = int(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    ttft = [row["ttft_ms"] for row in rows]
    assert ttft_p50 == f"{quantile(ttft, 0.5):.1f}"
    if n < 100:
        assert (ttft_p99, e2e_p99) == ("-", "-")
    else:
        assert ttft_p99 == f"{quantile(ttft, 0.99):.1f}"
        assert e2e_p99 == f"{quantile([row['e2e_ms'] for row in rows], 0.99):.1f}"


def test_a_target_that_fell_behind_is_said_with_offered_against_completed(
        capsys: pytest.CaptureFixture[str]) -> None:
    """36 req/s offered, each answered 2 s after the previous one finished: the console
    says what was offered and completed (recounted here from the rows) and that the
    target did not keep up, where the old console said only an SLO verdict."""
    n = 360
    rows = [{
        "workload": "flood", "outcome": "ok", "scheduled_ts": T0 + i / 36.0,
        "sent_ts": T0 + i / 36.0, "end_ts": T0 + 0.5 + i / 14.0,
        "schedule_lag_ms": 0.1, "ttft_ms": 100.0, "e2e_ms": 300.0, "tpot_ms": 5.0,
        "input_tokens": 100, "output_tokens": 16, "itl_ms": [5.0] * 15,
    } for i in range(n)]
    frame, itl = frame_from_rows(rows)
    telemetry = pd.DataFrame({"ts": [], "source": [], "metric": [], "labels": [], "value": []})
    run = RunData(run_dir=Path("/nonexistent"), manifest=_manifest(
        counters={"sent": n, "dropped_arrivals": 0}), requests=frame, itl=itl,
        telemetry=telemetry, microbench=None, requests_source="jsonl")
    out = _console(analyse_run(run), capsys)
    window = 10.0  # the manifest's load duration, from the first arrival
    offered = sum(T0 <= r["scheduled_ts"] < T0 + window for r in rows) / window
    completed = sum(r["end_ts"] <= T0 + window for r in rows) / window
    assert (f"load: offered {offered:.2f} req/s, completed {completed:.2f} req/s "
            f"({completed / offered:.0%} of offered)") in out, out
    assert (f"zerohop: warning: the target did not keep up: it completed {completed:.2f} of "
            f"the {offered:.2f} req/s offered") in out, out
    # the same run under --max-concurrency 8: the cap held the arrivals, and says so
    run.manifest["load"] = {**run.manifest["load"], "max_concurrency": 8}
    out = _console(analyse_run(run), capsys)
    assert (f"zerohop: warning: the --max-concurrency 8 cap held back "
            f"{offered - completed:.2f} req/s of the {offered:.2f} offered") in out, out
    assert "the target did not keep up" not in out


def test_a_workload_whose_requests_all_ended_after_the_window_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Long documents sent inside a 10 s window but answered after it: 0.00 req/s is
    its true rate over the window, and the console says why it is zero."""
    rows = [{
        "workload": "flood", "outcome": "ok", "scheduled_ts": T0 + i * 0.1,
        "sent_ts": T0 + i * 0.1, "end_ts": T0 + i * 0.1 + 0.3, "schedule_lag_ms": 0.1,
        "ttft_ms": 20.0, "e2e_ms": 300.0, "tpot_ms": 5.0, "input_tokens": 100,
        "output_tokens": 16, "itl_ms": [5.0] * 15} for i in range(90)]
    rows += [{
        "workload": "long_documents", "outcome": "ok", "scheduled_ts": math.nan,
        "sent_ts": T0 + i, "end_ts": T0 + 12.0 + i, "schedule_lag_ms": math.nan,
        "ttft_ms": 9000.0, "e2e_ms": 12000.0, "tpot_ms": 40.0, "input_tokens": 16000,
        "output_tokens": 64, "itl_ms": [40.0] * 63} for i in range(3)]
    frame, itl = frame_from_rows(rows)
    telemetry = pd.DataFrame({"ts": [], "source": [], "metric": [], "labels": [], "value": []})
    run = RunData(run_dir=Path("/nonexistent"), manifest=_manifest(), requests=frame, itl=itl,
                  telemetry=telemetry, microbench=None, requests_source="jsonl")
    out = _console(analyse_run(run), capsys)
    assert ("(long_documents: its 3 ok requests all ended after the 10.0 s window, so none "
            "counts in its rates)") in out, out
    assert "flood:" not in out
