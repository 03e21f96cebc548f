"""Locust's own statistics count each request once (its E2E): the headless header's
RPS and "Aggregated" count are the run's, and TTFT is its own table after the run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.loadgen.conftest import locust_final_stats, only_run_dir, run_locust

pytestmark = pytest.mark.integration


def test_each_request_is_one_locust_entry_and_ttft_its_own_table(tmp_path: Path,
                                                                  workload_file) -> None:
    wl = workload_file("""
kind: short_query_flood
name: flood
input_tokens: 32
max_tokens: 16
load: {kind: closed, users: 3}
""")
    res = run_locust(["--headless", "-u", "3", "-r", "3", "-t", "4s", "--stop-timeout", "5",
                      "--results-dir", str(tmp_path / "r"), "--workload", str(wl),
                      "--telemetry", "", "--json-file", str(tmp_path / "loc"),
                      "ShortQueryFlood"])
    assert res.returncode == 0, res.stderr[-3000:]
    df = pd.read_parquet(only_run_dir(tmp_path / "r") / "requests.parquet")
    assert len(df) > 5
    stats = locust_final_stats(tmp_path / "loc")
    assert sum(e["num_requests"] for e in stats.values()) == len(df), sorted(stats)
    assert {method for method, _ in stats} == {"E2E"}
    out = res.stdout + res.stderr
    assert not [line for line in out.splitlines() if line.split()[:2] == ["TTFT", "flood"]]
    # the TTFT table: the records' own p50, one row for the workload
    header = next(i for i, line in enumerate(out.splitlines())
                  if line.startswith("TTFT (ms), ok requests"))
    row = out.splitlines()[header + 2].split()
    ok = df[df.outcome == "ok"].ttft_ms.to_numpy(dtype=float)
    assert row[0] == "flood" and int(row[1]) == ok.size
    assert float(row[2]) == pytest.approx(float(np.percentile(ok, 50)), abs=0.05)
