"""Issue 10 §7: a steady run keeps the memory of the load generator and of the target
flat, and loses no record.

CI runs it as its own tier (`.ci/run`, marker `soak`) for 5 minutes; ZEROHOP_SOAK_S runs
it longer. Memory is judged over the run's second half, when imports, connections and
the first buffers are behind it: each process's resident memory may grow by at most a
bound fixed here, in MiB, whatever the run measures. The target keeps only its last
GROUND_TRUTH_KEEP ground-truth records in memory (the file keeps all), so a flat target
is a fair ask of a short soak; the load generator's in-memory state is bounded by design.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from tests.background import running_in_background
from tests.reliability.conftest import FLOOD_WORKLOAD, locust_cmd, only_run_dir, run
from tests.reliability.test_interruptions import assert_nothing_missing
from zerohop.sim.launcher import start_sim

SOAK_S = int(os.environ.get("ZEROHOP_SOAK_S", "300"))
pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.integration,
              pytest.mark.timeout(SOAK_S + 300)]  # the repo's default 600 s is too short

USERS = 8
GROUND_TRUTH_KEEP = 1000
# RSS growth over the second half, per process, fixed in advance
LOADGEN_GROWTH_MIB = 4.0
TARGET_GROWTH_MIB = 4.0
EDGE_SAMPLES = 5  # the medians that open and close the judged half


def rss_bytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


@contextmanager
def sampling_rss(pid: int, period_s: float = 1.0) -> Iterator[list[tuple[float, float]]]:
    """(wall time, RSS bytes) of `pid` every `period_s` while the block runs."""
    samples: list[tuple[float, float]] = []

    def sample(stop: threading.Event) -> None:
        while not stop.wait(period_s):
            samples.append((time.time(), rss_bytes(pid)))

    with running_in_background(sample):
        yield samples


def second_half_growth_mib(samples: pd.DataFrame, start: float, end: float) -> tuple[float, float]:
    """(RSS at the start of the second half, its growth to the end), in MiB: medians of
    EDGE_SAMPLES samples at each edge."""
    half = samples[(samples.ts >= start + (end - start) / 2) & (samples.ts <= end)]
    half = half.sort_values("ts")
    assert len(half) >= 4 * EDGE_SAMPLES, f"only {len(half)} samples in the second half"
    opening = half.value.iloc[:EDGE_SAMPLES].median() / 2**20
    closing = half.value.iloc[-EDGE_SAMPLES:].median() / 2**20
    return opening, closing - opening


def test_steady_run_keeps_memory_flat_and_records_complete(tmp_path: Path) -> None:
    wl = tmp_path / "soak.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=32, users=USERS))
    truth = tmp_path / "truth.jsonl"
    with start_sim(["--seed", "7", "--ground-truth-keep", str(GROUND_TRUTH_KEEP)],
                   ground_truth=truth) as sim, sampling_rss(sim.pid) as target_rss:
        res = run(locust_cmd(
            "--headless", "-u", str(USERS), "-r", str(USERS), "-t", f"{SOAK_S}s",
            "--stop-timeout", "10", "--host", sim.url, "--results-dir", str(tmp_path / "r"),
            "--workload", str(wl), "--telemetry", "loadgen", "ShortQueryFlood"),
            timeout=SOAK_S + 180)
        assert sim.alive()
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "r")
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    df = assert_nothing_missing(run_dir, truth)  # every request the target finished
    assert (df.outcome == "ok").all(), df.outcome.value_counts()
    start, end = float(df.sent_ts.min()), float(df.end_ts.max())

    tel = pd.read_parquet(run_dir / "telemetry.parquet")
    loadgen = tel[tel.metric == "loadgen_rss_bytes"]
    assert loadgen.source.nunique() == 1, sorted(set(loadgen.source))
    target = pd.DataFrame(target_rss, columns=["ts", "value"])
    lg_at, lg_growth = second_half_growth_mib(loadgen, start, end)
    tg_at, tg_growth = second_half_growth_mib(target, start, end)
    print(f"\nsoak {SOAK_S}s: {len(df)} records, {len(df) / (end - start):.1f} req/s; RSS over "
          f"the second half: load generator {lg_at:.1f} MiB {lg_growth:+.1f} MiB "
          f"(bound {LOADGEN_GROWTH_MIB:g}), target {tg_at:.1f} MiB {tg_growth:+.1f} MiB "
          f"(bound {TARGET_GROWTH_MIB:g})")
    assert lg_growth < LOADGEN_GROWTH_MIB
    assert tg_growth < TARGET_GROWTH_MIB
