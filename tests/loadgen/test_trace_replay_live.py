"""Trace replay through real Locust keeps the trace's burst shape: the Azure
conversation trace (the package's slice, so it runs on a bare clone) at 10× for 30 s,
per-second arrival counts of what was actually sent against the trace's own
(correlation ≥ 0.95)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.loadgen.conftest import only_run_dir, run_locust
from zerohop.workloads.schema.data_paths import package_data_dir
from zerohop.workloads.timing.traces import read_trace, replay_window

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TRACE = package_data_dir() / "traces" / "azure_conv_first3600.csv"


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_azure_trace_at_10x_keeps_its_per_second_arrivals(tmp_path: Path, workload_file) -> None:
    wl = workload_file(f"""
kind: trace_replay
name: azure
trace: {TRACE}
speed: 10
duration_s: 30
scale_tokens: {{input_multiplier: 0.02, max_input_tokens: 64, max_output_tokens: 4}}
load: {{kind: trace, max_in_flight: 2000}}
""")
    res = run_locust(["--headless", "-u", "1", "-r", "1", "-t", "32s", "--results-dir",
                      str(tmp_path / "r"), "--workload", str(wl), "--telemetry", "none",
                      "--drain-timeout", "5", "TraceReplay"], timeout=240)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    sent = pd.read_parquet(only_run_dir(tmp_path / "r") / "requests.parquet")
    planned = replay_window(read_trace(TRACE), speed=10, duration_s=30)
    offsets = np.array([r.offset_s for r in planned])
    assert abs(len(sent) - len(offsets)) <= 0.01 * len(offsets)  # nothing dropped or added
    t = sent.sent_ts.to_numpy() - sent.sent_ts.min() + offsets.min()
    bins = np.arange(0, 31)
    ours, _ = np.histogram(t, bins)
    theirs, _ = np.histogram(offsets, bins)
    rho = np.corrcoef(ours[:-1], theirs[:-1])[0, 1]
    print(f"per-second arrivals: {len(sent)} sent vs {len(offsets)} in the trace, rho={rho:.4f}")
    assert rho >= 0.95, rho
    # sends land in the trace's own second: lag well under the 1 s bins checked above
    assert sent.schedule_lag_ms.quantile(0.99) < 0.1 * 1000
