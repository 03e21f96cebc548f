"""Fake results folders for the planning tests: the documented layout (manifest.json,
requests.parquet) with only the columns the analysis reads, latencies drawn from a
seeded model with known answers. A fake sweep runner uses them so the sweep and
capacity logic are tested on real folder formats without starting servers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import RunResult

T0 = 1_795_000_000.0
CAPACITY_RPS = 10.0
BASE_TTFT_MS = 30.0


def write_fake_run(
    root: Path,
    name: str,
    *,
    rate_rps: float,
    duration_s: float = 20.0,
    ttft_ms: float = BASE_TTFT_MS,
    tpot_ms: float = 20.0,
    output_tokens: int = 32,
    error_rate: float = 0.0,
    seed: int = 0,
    noise: float = 0.1,
) -> Path:
    """A completed open-loop run: `rate_rps × duration_s` requests, lognormal noise."""
    rng = np.random.default_rng(seed)
    n = max(10, int(rate_rps * duration_s))
    scheduled = T0 + np.sort(rng.uniform(0.0, duration_s, n))
    ttft = ttft_ms * rng.lognormal(0.0, noise, n)
    tpot = tpot_ms * rng.lognormal(0.0, noise / 2, n)
    e2e = ttft + tpot * (output_tokens - 1)
    failed = rng.random(n) < error_rate
    outcome = np.where(failed, "http_500", "ok")
    nan_if_failed = lambda v: np.where(failed, np.nan, v)  # noqa: E731
    itl = [list(np.full(output_tokens - 1, t)) if not f else [] for t, f in zip(tpot, failed,
                                                                              strict=True)]
    table = pa.table({
        "workload": ["chat"] * n,
        "outcome": outcome,
        "scheduled_ts": scheduled,
        "sent_ts": scheduled,
        "first_content_ts": nan_if_failed(scheduled + ttft / 1e3),
        "end_ts": scheduled + e2e / 1e3,
        "ttft_ms": nan_if_failed(ttft),
        "tpot_ms": nan_if_failed(tpot),
        "e2e_ms": nan_if_failed(e2e),
        "input_tokens": np.full(n, 100.0),
        "output_tokens": nan_if_failed(np.full(n, float(output_tokens))),
        "itl_ms": pa.array(itl, type=pa.list_(pa.float64())),
    })
    run_dir = Path(root) / f"20261129-190000-{name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, run_dir / "requests.parquet")
    manifest = {
        "schema": "zerohop.run", "schema_version": 1, "name": name, "status": "completed",
        "duration_s": duration_s, "target": {"url": "http://127.0.0.1:9", "kind": "embedded"},
        "load": {"mode": "open", "rate_rps": rate_rps, "duration_s": duration_s},
        "counters": {"sent": n, "dropped_arrivals": 0}, "slo": {},
        "workloads": [{"name": "chat", "file": "chat.yaml"}],
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def queue_ttft_ms(load: float, capacity: float = CAPACITY_RPS) -> float:
    """M/M/1-like growth towards `capacity`."""
    return BASE_TTFT_MS / (1.0 - min(load / capacity, 0.995))


def synthetic_runner(plan: RunPlan) -> RunResult:
    """A sweep point whose TTFT grows like a queue saturating at CAPACITY_RPS."""
    load = plan.rate if plan.rate is not None else float(plan.users)
    run_dir = write_fake_run(plan.results_dir, plan.name, rate_rps=min(load, CAPACITY_RPS),
                             ttft_ms=queue_ttft_ms(load), seed=int(load * 1000))
    return RunResult(run_dir, 0, None)
