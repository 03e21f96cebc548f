"""The first screen's Load says what each workload really had (from its records), not the
run's flags: a default run's "closed, 5 users" while most of its traffic was open loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from zerohop.analysis.run_analysis import analyse_run
from zerohop.analysis.run_data import RunData, frame_from_rows
from zerohop.report.present_headline import run_header

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0


def _row(workload: str, request_id: str, t: float, scheduled: bool,
         end: float | None = None) -> dict[str, Any]:
    return {"request_id": request_id, "workload": workload, "outcome": "ok",
            "scheduled_ts": t if scheduled else None, "sent_ts": t,
            "end_ts": t + 0.2 if end is None else end,
            "ttft_ms": 50.0, "e2e_ms": 200.0, "tpot_ms": 5.0, "input_tokens": 10,
            "output_tokens": 16, "itl_ms": [5.0] * 15}


def test_load_is_each_workloads_own() -> None:
    rows = [_row("flood", f"vm-1-disp-{i}", T0 + i * 0.05, True) for i in range(200)]
    # two users back to back: each request starts as that user's last one ends
    for user in range(2):
        starts = [T0 + user * 0.1 + i * 0.2 for i in range(21)]
        rows += [_row("docs", f"vm-1-user{user}-{i}", starts[i], False, end=starts[i + 1])
                 for i in range(20)]
    frame, itl = frame_from_rows(rows)
    telemetry = pd.DataFrame({"ts": [], "source": [], "metric": [], "labels": [], "value": []})
    manifest = {"run_id": "r", "status": "completed",
                "load": {"mode": "closed", "users": 5, "duration_s": 10.0}}
    run = RunData(run_dir=Path("/nonexistent"), manifest=manifest, requests=frame, itl=itl,
                  telemetry=telemetry, microbench=None, requests_source="jsonl")
    load = run_header(analyse_run(run), manifest)["load"]
    assert load == "flood: open, 20.0 req/s · docs: closed, at most 2 in flight", load
