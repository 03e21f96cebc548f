"""An interrupted run's rates are over the time it really offered load: from its first
arrival to the signal that stopped it, not over the duration it had planned."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.reliability.conftest import (
    FLOOD_WORKLOAD,
    only_run_dir,
    start,
    stop_group,
    wait_for,
    zerohop_cmd,
)
from zerohop.analysis.latency.run_summary import summarise_run
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.integration

PLANNED_S = 30


def records_flowing(results: Path) -> bool:
    return sum(p.read_bytes().count(b"\n") for p in results.rglob("records/*.jsonl")) >= 5


@pytest.mark.parametrize("after_s", [0.5, 4.0])
def test_rates_of_an_interrupted_run_divide_by_the_time_it_ran(after_s: float,
                                                               tmp_path: Path) -> None:
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=16, users=3))
    proc = start(zerohop_cmd(
        "run", "--duration", f"{PLANNED_S}s", "--workload", str(wl), "--only",
        "ShortQueryFlood", "--telemetry", "none", "--microbench", "off", "--no-report",
        "--results-dir", str(tmp_path / "r")), log=tmp_path / "out.log")
    try:
        assert wait_for(lambda: records_flowing(tmp_path / "r"), 60), \
            (tmp_path / "out.log").read_text()[-2000:]
        time.sleep(after_s)
        signalled = time.time()
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        exited = time.time()
    finally:
        stop_group(proc)
    out = (tmp_path / "out.log").read_text()
    run_dir = only_run_dir(tmp_path / "r")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted", manifest
    # no --host: the embedded target's URL is the target's, the plan's host is null
    assert manifest["config"]["host"] is None and manifest["target"]["url"].startswith("http")

    requests = pd.read_parquet(run_dir / "requests.parquet")
    first = float(requests.sent_ts.min())
    total = summarise_run(load_run(run_dir), slos={}).total
    window = total.window_s
    # the load stopped after the signal was sent and before the run exited
    assert signalled - first <= window <= exited - first, (window, signalled - first,
                                                            exited - first)
    assert window < PLANNED_S / 2
    ended_inside = int(((requests.outcome == "ok") & (requests.end_ts >= first)
                        & (requests.end_ts <= first + window)).sum())
    assert ended_inside > 0
    assert total.req_per_s == pytest.approx(ended_inside / window, rel=1e-9)
    # and the console's table says the same rate
    assert f"{total.req_per_s:.1f}" in out or f"{total.req_per_s:.2f}" in out, out[-2000:]
