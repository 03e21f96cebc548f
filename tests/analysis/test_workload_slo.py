"""A workload's own `slo:` block judges that workload and decides its goodput; the run's
`--slo` replaces every workload's own (docs/slo.md, "Whose objectives")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from zerohop.analysis.latency.run_summary import summarise_run
from zerohop.analysis.run_data import RunData, frame_from_rows

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0


def _run(manifest_slo: dict[str, Any], workload_slo: dict[str, Any]) -> RunData:
    """Two workloads of 10 ok requests each over 10 s; TTFT 10, 20, ..., 100 ms."""
    rows = [
        {"workload": name, "outcome": "ok", "sent_ts": T0 + i, "scheduled_ts": T0 + i,
         "end_ts": T0 + i + 0.5, "ttft_ms": 10.0 * (i + 1), "e2e_ms": 500.0,
         "output_tokens": 8, "input_tokens": 32}
        for name in ("chat", "batch") for i in range(10)
    ]
    frame, itl = frame_from_rows(rows)
    manifest = {"run_id": "slo", "slo": manifest_slo, "workload_slo": workload_slo,
                "load": {"mode": "open", "duration_s": 10.0}}
    telemetry = pd.DataFrame({"ts": [], "source": [], "metric": [], "labels": [], "value": []})
    return RunData(Path("/nonexistent"), manifest, frame, itl, telemetry, None, "jsonl")


def _goodput(summary: Any, workload: str) -> float:
    return next(s for s in summary.workloads if s.workload == workload).goodput_rps


def test_a_workloads_own_slo_decides_its_goodput_and_verdict() -> None:
    summary = summarise_run(_run({}, {"chat": {"ttft_ms": 50}}))
    # chat: TTFT 10..100 ms, so 5 of its 10 requests are within 50 ms; batch has no SLO
    assert _goodput(summary, "chat") == pytest.approx(0.5)
    assert _goodput(summary, "batch") == pytest.approx(1.0)
    [result] = summary.slo_results
    assert (result.workload, result.target.key, result.met) == ("chat", "ttft_ms", False)
    assert result.label == "chat: ttft_ms"
    assert result.observed_ms == pytest.approx(100.0)


def test_the_runs_slo_replaces_the_workloads_own() -> None:
    summary = summarise_run(_run({"ttft_ms": 30}, {"chat": {"ttft_ms": 50}}))
    assert _goodput(summary, "chat") == pytest.approx(0.3)
    assert _goodput(summary, "batch") == pytest.approx(0.3)
    [result] = summary.slo_results
    assert result.workload is None and result.target.threshold_ms == 30


def test_a_bad_workload_objective_is_a_note_not_a_failure() -> None:
    summary = summarise_run(_run({}, {"chat": {"ttft_q99_ms": 50}}))
    assert summary.slo_results == []
    assert any(note.startswith("chat: ") and "q99" in note for note in summary.notes)


def test_explicit_objectives_ignore_the_workloads_own() -> None:
    """A caller that passes `slos` (sweep, capacity: the plan's objectives) judges by
    those alone."""
    summary = summarise_run(_run({}, {"chat": {"ttft_ms": 50}}), slos={})
    assert summary.slo_results == []
    assert _goodput(summary, "chat") == pytest.approx(1.0)
