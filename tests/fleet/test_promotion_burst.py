"""The promotion burst at production rates on the virtual clock (README: "it saturates
and dies of memory while the replicas' batches stay far from full"): the shipped
workload, its 12k -> 48k req/s spike moved to the start of a short window, through the
default layer (`--layer on`: its CPU takes 32k req/s) in front of 128 modelled
replicas, keeping a 2 % sample of the records. The simulated arrivals must reach the
spike's 48k req/s; the layer must saturate while the replicas do not."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from zerohop.fleet.layer_model import parse_layer_spec
from zerohop.fleet.run import SimulationPlan, run_simulation
from zerohop.sim.config import load_config
from zerohop.sim.embedded import EMBEDDED_TARGET_CONFIG

pytestmark = [pytest.mark.unit, pytest.mark.slow]

WORKLOAD = Path(__file__).resolve().parents[2] / "workloads" / "promotion_burst.yaml"
SPIKE_AT_S, SPIKE_S, WINDOW_S = 1.0, 2.0, 3.0
REPLICAS = 128
SAMPLE = 0.02
PEAK_RPS = 48_000


def short_burst(out: Path) -> Path:
    """The shipped workload with its spike at SPIKE_AT_S for SPIKE_S (rates unchanged)."""
    spec = yaml.safe_load(WORKLOAD.read_text())
    shape = spec["load"]["shape"]
    assert spec["load"]["rate_rps"] * 4 == PEAK_RPS == spec["load"]["rate_rps"] * shape[
        "peak_multiplier"], spec["load"]
    shape.update(at_s=SPIKE_AT_S, duration_s=SPIKE_S)
    path = out / "burst.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_promotion_burst_saturates_the_layer_and_not_the_replicas(tmp_path: Path) -> None:
    result = run_simulation(SimulationPlan(
        workload=short_burst(tmp_path), duration_s=WINDOW_S,
        config=load_config(Path(str(EMBEDDED_TARGET_CONFIG)), {}), replicas=REPLICAS,
        layer=parse_layer_spec("on"), record_sample=SAMPLE, results_dir=tmp_path / "r",
        drain_s=5.0))
    summary = result.summary
    print({k: summary[k] for k in ("wall_s", "arrivals", "layer_failed_at_s", "outcomes")},
          summary["peak"])
    # every arrival is counted (the sample is of the records): the spike's are all but
    # the base rate's, and Poisson counts of ~108k scatter by ~0.3 %
    arrivals = summary["arrivals"]
    base = PEAK_RPS / 4 * (WINDOW_S - SPIKE_S)
    spike_rps = (arrivals - base) / SPIKE_S
    assert spike_rps >= PEAK_RPS * (1 - 4 / math.sqrt(arrivals)), (arrivals, spike_rps)
    records = pd.read_parquet(result.run_dir / "requests.parquet", columns=["sent_ts"])
    sent = records.sent_ts - records.sent_ts.min()
    in_spike = ((sent >= SPIKE_AT_S) & (sent < SPIKE_AT_S + SPIKE_S)).sum()
    assert in_spike / SAMPLE / SPIKE_S == pytest.approx(spike_rps, rel=0.1)  # when it came
    peak = summary["peak"]
    capacity = parse_layer_spec("on").capacity_rps
    assert capacity < PEAK_RPS  # what makes it saturate
    assert peak["layer_cpu_pct"] == pytest.approx(100)
    assert peak["layer_queued_requests"] > 0.5 * (PEAK_RPS - capacity)  # ~1 s of excess
    assert peak["batch_occupancy_frac"] < 0.25, peak
    assert peak["kv_cache_usage_frac"] < 0.25, peak
    # a replica's arrivals wait at most for the step in flight: no queue builds there
    assert peak["queue_depth"] < 2 * REPLICAS, peak
