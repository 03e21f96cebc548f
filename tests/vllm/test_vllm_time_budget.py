"""The time budget on a real vLLM CPU server: its queue and prefill parts come from
vLLM's own histograms (`vllm:request_queue_time_seconds`,
`vllm:request_prefill_time_seconds`), apportioned to the run's requests so that
together they keep the histograms' exact totals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.vllm_cpu import VllmServer
from zerohop.analysis.server.engine_phases import histogram_windows, phase_shares
from zerohop.analysis.server.time_budget import time_budget
from zerohop.storage.run_reader import load_run

FLOOD = Path(__file__).with_name("vllm_flood.yaml")
FAMILIES = {"queue": "vllm:request_queue_time_seconds",
            "prefill": "vllm:request_prefill_time_seconds"}


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_queue_and_prefill_come_from_vllms_histograms(vllm_server: VllmServer,
                                                      tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", vllm_server.url, "--model", "tiny",
         "--workload", str(FLOOD), "--rate", "3", "--duration", "25s",
         "--telemetry", "prom,loadgen", "--no-report", "--results-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode in (0, 1), res.stdout[-2000:] + res.stderr[-3000:]
    run = load_run(next(p for p in tmp_path.iterdir() if p.is_dir()))
    requests, telemetry = run.requests, run.telemetry
    ok_share = float((requests["outcome"] == "ok").mean())
    assert ok_share > 0.8, f"vLLM answered only {ok_share:.0%} of 3 req/s: a busy machine?"
    budget = time_budget(requests, telemetry)
    [flood] = budget.workloads
    assert {b.metric for b in flood.bands} == {"ttft_ms", "e2e_ms"}
    for band in flood.bands:
        for phase, family in FAMILIES.items():
            part = band.part(phase)
            assert part is not None, (band.band, band.metric, phase, budget.notes)
            assert part.aggregate and part.source.startswith(family)
            # every request had its scrape interval but, in a small band, the one that
            # finished after the run's last scrape
            assert part.n >= min(0.9 * band.n, band.n - 1)
            assert 0.0 <= part.low_ms <= part.mean_ms <= part.high_ms
    ok = (requests["outcome"] == "ok").to_numpy()
    for phase, family in FAMILIES.items():
        windows = histogram_windows(telemetry, family)
        observed = sum(w.cumulative[-1] for w in windows)
        exact_ms = 1e3 * sum(w.mean_s * w.cumulative[-1] for w in windows) / observed
        shares = phase_shares(requests, telemetry, "ttft_ms", phase)
        assert shares is not None and shares.family == family
        placed = np.isfinite(shares.estimate_ms) & ok
        assert abs(placed.sum() - observed) <= 0.1 * observed  # vLLM saw these requests
        # what the requests were given adds up to what vLLM observed, to the edges' slack
        assert float(np.nanmean(shares.low_ms[placed])) <= exact_ms * 1.05 + 0.5
        assert float(np.nanmean(shares.high_ms[placed])) >= exact_ms * 0.95 - 0.5
        estimated = float(np.nanmean(shares.estimate_ms[placed]))
        assert estimated == pytest.approx(exact_ms, rel=0.2, abs=1.0)
