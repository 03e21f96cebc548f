"""`--rate R` is the run's total offered rate: split by weight over every workload it runs,
the trace replay included (it used to add its own ~17 req/s: `--rate 20` offered 36). One
real run on the four default workloads; every figure recomputed here from the records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from tests.main_job.test_run_command import zerohop

pytestmark = pytest.mark.integration

RATE = 20.0
DURATION_S = 10.0


def test_rate_20_offers_20_in_total_and_says_what_was_completed(tmp_path: Path) -> None:
    res = zerohop("run", "--rate", f"{RATE:g}", "--duration", f"{DURATION_S:g}s",
                  "--telemetry", "loadgen", "--microbench", "off", "--no-report",
                  "--results-dir", str(tmp_path))
    assert res.returncode in (0, 1), res.stderr[-3000:]
    (run_dir,) = tmp_path.iterdir()
    records = pd.read_parquet(run_dir / "requests.parquet")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert records["workload"].nunique() == 4  # every default workload sent

    arrival = records["scheduled_ts"].fillna(records["sent_ts"])
    start = arrival.min()
    window = float(manifest["load"]["duration_s"])
    due = int(((arrival >= start) & (arrival < start + window)).sum())
    dropped = int(manifest.get("counters", {}).get("dropped_arrivals", 0))
    expected = RATE * window
    # Poisson arrivals (the trace's share is its own, counted to within a timestamp tie)
    assert abs(due + dropped - expected) <= 4 * math.sqrt(expected), (due, dropped, expected)

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["total"]["rates"]["offered_rps"] == pytest.approx(due / window)
    ended = records["end_ts"]
    completed = int(((records["outcome"] == "ok") & (ended >= start)
                     & (ended <= start + window)).sum()) / window
    assert summary["total"]["rates"]["req_per_s"] == pytest.approx(completed)
    assert (f"load: offered {due / window:.2f} req/s, completed {completed:.2f} req/s"
            in res.stdout), res.stdout[-2000:]
