"""The fleet's discrete-event core: the layer's finite capacity, the replicas behind it,
the virtual timestamps and the offered rates (`zerohop simulate`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from zerohop.fleet.layer_model import LayerSpec
from zerohop.fleet.run import SimulationPlan, SimulationResult, run_simulation
from zerohop.sim.config import SimConfig
from zerohop.sim.engine.engine import Engine

pytestmark = pytest.mark.unit

FLOOD = """\
kind: short_query_flood
name: flood
input_tokens: {input}
max_tokens: {output}
ignore_eos: true
load: {{kind: open, rate_rps: {rate}, arrival: {arrival}{shape}}}
"""


def simulate(tmp_path: Path, *, rate: float, duration_s: float, input: int = 64,
             output: int = 8, arrival: str = "poisson", shape: str = "",
             **plan: object) -> tuple[SimulationResult, pd.DataFrame, pd.DataFrame]:
    tmp_path.mkdir(exist_ok=True)
    workload = tmp_path / "flood.yaml"
    workload.write_text(FLOOD.format(input=input, output=output, rate=rate,
                                     arrival=arrival, shape=shape))
    result = run_simulation(SimulationPlan(
        workload=workload, duration_s=duration_s, config=SimConfig(),
        results_dir=tmp_path / "results", **plan))  # type: ignore[arg-type]
    records = pd.read_parquet(result.run_dir / "requests.parquet")
    telemetry = pd.read_parquet(result.run_dir / "telemetry.parquet")
    return result, records, telemetry


def test_a_layer_past_its_cpu_fills_its_memory_and_dies_with_a_reason(tmp_path: Path) -> None:
    # 1 core at 1 ms a request takes 1000 req/s; 2000 arrive: the queue grows 1000/s, and
    # room for 500 requests is gone after about half a second
    layer = LayerSpec(cpu_ms=1.0, cores=1, memory_mib=1 + 500 / 1024, base_mib=1,
                      request_kib=1)
    result, records, _ = simulate(tmp_path, rate=2000, duration_s=2, arrival="constant",
                                  layer=layer, replicas=4, input=16, output=2)
    died = result.summary["layer_failed_at_s"]
    assert died == pytest.approx(0.5, abs=0.03)  # plus the few at the replicas
    failed = records[records.outcome != "ok"]
    assert set(failed.error_type) == {"layer_out_of_memory", "layer_down"}
    lost = failed[failed.error_type == "layer_out_of_memory"]
    assert len(lost) == 500  # everything it held
    start = records.sent_ts.min()
    assert (records[records.outcome == "ok"].sent_ts - start).max() < died
    down = failed[failed.error_type == "layer_down"]
    assert ((down.sent_ts - start) >= died - 1e-9).all()
    assert set(down.outcome) == {"connect_error"}
    assert sum(result.summary["outcomes"].values()) == result.summary["arrivals"]


def test_below_its_capacity_the_layer_passes_everything(tmp_path: Path) -> None:
    layer = LayerSpec(cpu_ms=1.0, cores=1, memory_mib=2, base_mib=1, request_kib=1)
    result, records, telemetry = simulate(tmp_path, rate=500, duration_s=3, layer=layer)
    assert result.summary["layer_failed_at_s"] is None
    assert set(records.outcome) == {"ok"}
    cpu = telemetry[telemetry.metric == "layer_cpu_pct"].value
    assert cpu.iloc[1:-1].median() == pytest.approx(50, abs=10)  # 500 req/s of 1000


def test_a_saturated_layer_leaves_the_replicas_underused(tmp_path: Path) -> None:
    layer = LayerSpec(cpu_ms=1.0, cores=1, memory_mib=64, base_mib=1, request_kib=1)
    result, _, _ = simulate(tmp_path, rate=3000, duration_s=2, layer=layer,
                            replicas=16)
    peak = result.summary["peak"]
    assert peak["layer_cpu_pct"] == pytest.approx(100)
    assert peak["layer_queued_requests"] > 1000
    # the 1000 req/s it passes are ~60 a replica: a 64-token prefill each is ~17 % of
    # an H100's FLOP/s, and a few sequences of 256
    assert peak["gpu_tensor_active_pct"] < 25
    assert peak["batch_occupancy_frac"] < 0.1


def test_the_worker_pool_caps_what_the_layer_streams(tmp_path: Path) -> None:
    layer = LayerSpec(cpu_ms=0.0, workers=3, memory_mib=64, base_mib=1, request_kib=1)
    _, _, telemetry = simulate(tmp_path, rate=400, duration_s=2, layer=layer, replicas=2,
                               output=64)
    running = telemetry[telemetry.metric == "running_requests"].value
    assert running.max() <= 3
    queued = telemetry[telemetry.metric == "layer_queued_requests"].value
    assert queued.max() > 0


def test_an_open_loads_in_flight_cap_drops_arrivals_as_the_client_does(tmp_path: Path
                                                                       ) -> None:
    result, records, telemetry = simulate(
        tmp_path, rate=400, duration_s=3, output=64, shape=", max_in_flight: 5")
    dropped = result.summary["dropped_arrivals"]
    assert dropped > 0.5 * 400 * 3
    assert telemetry[telemetry.metric == "running_requests"].value.max() <= 5
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["counters"] == {"sent": len(records), "dropped_arrivals": dropped,
                                    "cancelled": 0}


def test_timestamps_are_virtual_and_in_order(tmp_path: Path) -> None:
    result, records, telemetry = simulate(tmp_path, rate=200, duration_s=5, replicas=2)
    ok = records[records.outcome == "ok"]
    assert (ok.sent_ts <= ok.first_content_ts).all()
    assert (ok.first_content_ts <= ok.end_ts).all()
    assert all(min(gaps) > 0 for gaps in ok.itl_ms)
    assert np.allclose(ok.ttft_ms + ok.tpot_ms * (ok.output_tokens - 1), ok.e2e_ms)
    for _, series in telemetry.groupby("metric", observed=True):
        assert series.ts.is_monotonic_increasing
    span = records.end_ts.max() - records.sent_ts.min()
    assert span < 6 and result.summary["wall_s"] < span  # simulated, not slept
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["simulation"]["clock"] == "virtual"
    assert manifest["load"]["duration_s"] == 5


def test_one_request_alone_takes_the_engine_models_times(tmp_path: Path) -> None:
    _, records, _ = simulate(tmp_path, rate=0.05, duration_s=2, input=200, output=5,
                             arrival="constant")
    [row] = records.itertuples()
    engine = Engine(SimConfig().models[0])
    assert row.ttft_ms == pytest.approx(engine.step_cost.prefill_s(200) * 1e3, rel=1e-6)
    decode_ms = [engine.step_cost.decode_s(1, 200 + k) * 1e3 for k in range(4)]
    assert list(row.itl_ms) == pytest.approx(decode_ms, rel=1e-6)


@pytest.mark.parametrize("rate", [50.0, 400.0])
def test_the_offered_rate_is_honoured(tmp_path: Path, rate: float) -> None:
    duration = 20.0
    result, records, _ = simulate(tmp_path, rate=rate, duration_s=duration, output=2,
                                  replicas=2)
    expected = rate * duration
    assert abs(len(records) - expected) < 4 * expected**0.5  # Poisson: 4 sigma
    assert result.summary["arrivals"] == len(records)


def test_a_spike_multiplies_the_rate_while_it_lasts(tmp_path: Path) -> None:
    _, records, _ = simulate(
        tmp_path, rate=100, duration_s=30, output=2, replicas=2,
        shape=", shape: {type: spike, peak_multiplier: 4, at_s: 10, duration_s: 10}")
    t = records.sent_ts - records.sent_ts.min()
    before, during = (t < 10).sum(), ((t >= 10) & (t < 20)).sum()
    assert during / before == pytest.approx(4, rel=0.2)


def test_a_records_sample_keeps_exact_counts(tmp_path: Path) -> None:
    result, records, _ = simulate(tmp_path, rate=1000, duration_s=4, output=2,
                                  record_sample=0.1, replicas=2)
    arrivals = result.summary["arrivals"]
    assert result.summary["outcomes"] == {"ok": arrivals}
    assert len(records) == pytest.approx(0.1 * arrivals, rel=0.15)
    assert result.summary["records_written"] == len(records)


def test_a_few_replicas_on_their_round_robin_share_stand_for_the_fleet(tmp_path: Path
                                                                       ) -> None:
    # 8 replicas at ~60 % of their prefill capacity: queueing shows in the tail, so the
    # replicas' arrival process (every 8th of a Poisson stream, not Poisson) matters
    kw = {"rate": 1400, "duration_s": 20, "input": 64, "output": 8}
    full, full_rows, _ = simulate(tmp_path / "full", replicas=8, **kw)  # type: ignore[arg-type]
    part, part_rows, _ = simulate(tmp_path / "part", replicas=8,  # type: ignore[arg-type]
                                  simulated_replicas=2, **kw)
    assert len(part_rows) == pytest.approx(len(full_rows) / 4, rel=0.05)
    assert part.summary["offered_rps"] == pytest.approx(full.summary["offered_rps"], rel=0.05)
    for metric in ("ttft_ms", "tpot_ms"):
        for q, tolerance in ((0.5, 0.05), (0.99, 0.1)):
            assert part_rows[metric].quantile(q) == pytest.approx(
                full_rows[metric].quantile(q), rel=tolerance), (metric, q)
