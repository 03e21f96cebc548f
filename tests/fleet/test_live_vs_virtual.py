"""The same small workload, run live against the embedded target (`zerohop run`, which
starts `zerohop sim`) and on the virtual clock (`zerohop simulate`): both run the one
engine model, so p50 and p99 of TTFT and TPOT agree within 5 %, plus twice what the
machine's load did to a process in that run (the p99 of a probe's wake-up lateness,
measured meanwhile beside the live run): the live target pays it, the virtual clock
does not. The slack comes from the probe, never from the result under test (the live
target's own emission lag is printed beside it).

`--time-scale 8` slows the modelled GPU so that the live run's own costs (HTTP, the
event loops, a busy shared machine) are small beside the modelled step times, as they
are beside a real GPU's; both runs use the run's default seed, so they offer the same
arrival times. The virtual side is deterministic; the live side's tail carries the
machine's load (on a busy CI machine its p99 TTFT ran 5.8 % above the model's, on a
quiet one 1.1 %), which the probe measures in the same run.
(A larger scale does not help: at 16, p50 TTFT parted by 5.8 %.)"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.background import running_in_background
from tests.main_job.test_run_command import zerohop
from zerohop.analysis.counters import histogram_quantile

pytestmark = pytest.mark.integration

WORKLOAD = """\
kind: short_query_flood
name: check
input_tokens: 64
max_tokens: 16
ignore_eos: true
load: {kind: open, rate_rps: 10, arrival: poisson}
"""
SCALE = "8"
PROBE_PERIOD_S = 0.001
FLOOR_FACTOR = 2.0  # a TTFT waits on the loop twice: the arrival, then the step's end


@contextmanager
def wakeup_lateness_ms() -> Iterator[list[float]]:
    """A thread that sleeps PROBE_PERIOD_S over and over meanwhile; the list fills with
    how late each wake-up came (ms): what the machine's load does to a process now."""
    late: list[float] = []

    def probe(stop: threading.Event) -> None:
        while not stop.is_set():
            due = time.perf_counter() + PROBE_PERIOD_S
            time.sleep(PROBE_PERIOD_S)
            late.append(max(0.0, time.perf_counter() - due) * 1e3)

    with running_in_background(probe):
        yield late


def _ok(results: Path) -> pd.DataFrame:
    [run_dir] = results.iterdir()
    frame = pd.read_parquet(run_dir / "requests.parquet")
    return frame[frame.outcome == "ok"]


def _emission_lag_p99_ms(results: Path) -> float:
    """The live target's emission-lag p99 over the run, from its last scrape."""
    [run_dir] = results.iterdir()
    telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
    buckets = telemetry[telemetry.metric == "zerohop_sim_emission_lag_seconds_bucket"]
    last = buckets[buckets.ts == buckets.ts.max()]
    pairs = sorted((float(json.loads(labels)["le"]), value)
                   for labels, value in zip(last.labels, last.value, strict=True))
    return 1e3 * histogram_quantile(0.99, pairs)


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_live_and_virtual_agree_on_ttft_and_tpot(tmp_path: Path) -> None:
    workload = tmp_path / "check.yaml"
    workload.write_text(WORKLOAD)
    with wakeup_lateness_ms() as late:
        live = zerohop("run", "--workload", str(workload), "--duration", "20s", "--no-report",
                       "--sim-args", f"--time-scale {SCALE}",
                       "--results-dir", str(tmp_path / "live"))
    assert live.returncode == 0, live.stderr[-1500:]
    virtual = zerohop("simulate", "--workload", str(workload), "--duration", "20s",
                      "--time-scale", SCALE, "--results-dir", str(tmp_path / "virtual"))
    assert virtual.returncode == 0, virtual.stderr[-1500:]
    measured, modelled = _ok(tmp_path / "live"), _ok(tmp_path / "virtual")
    assert len(measured) > 150 and len(modelled) > 150
    pairs = {(metric, q): (measured[metric].quantile(q), modelled[metric].quantile(q))
             for metric in ("ttft_ms", "tpot_ms") for q in (0.5, 0.99)}
    lag_ms = _emission_lag_p99_ms(tmp_path / "live")
    floor_ms = float(np.percentile(late, 99))
    print({k: (round(a, 2), round(b, 2), f"{b / a - 1:+.1%}") for k, (a, b) in pairs.items()},
          f"wake-up lateness p99 {floor_ms:.2f} ms ({len(late)} wake-ups); live target's "
          f"emission lag p99 {lag_ms:.2f} ms")
    for key, (live_q, virtual_q) in pairs.items():
        slack = 0.05 * live_q + FLOOR_FACTOR * floor_ms
        assert abs(virtual_q - live_q) <= slack, (key, live_q, virtual_q, floor_ms, lag_ms)
