"""The measured window (docs/design.md): one interval for every rate of a run, taken
from the manifest, so achieved load can never exceed the offered load by more than the
arrival process's own noise however sparse or late the sends are.

The bound: over a window of W seconds, Poisson arrivals at λ number λW ± √(λW); an
achieved rate counts a subset of them, so it stays under λ(1 + k/√(λW)) with k = 3
(3σ of a Poisson count), and under the *recorded* offered rate (the same arrivals
counted over the same seconds) with no slack at all.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zerohop.analysis.latency.run_summary import summarise_run
from zerohop.analysis.measured_window import measured_window, window_of
from zerohop.analysis.run_data import ItlColumn, RunData, frame_from_rows

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0
K_SIGMA = 3.0


def _run(rows: list[dict[str, Any]], manifest: dict[str, Any]) -> RunData:
    frame, itl = frame_from_rows(rows)
    return RunData(run_dir=Path("/nonexistent"), manifest=manifest, requests=frame, itl=itl,
                   telemetry=_no_telemetry(), microbench=None, requests_source="jsonl")


def _no_telemetry() -> Any:
    import pandas as pd

    return pd.DataFrame({"ts": [], "source": [], "metric": [], "labels": [], "value": []})


def _rows(arrivals: np.ndarray, service_s: np.ndarray) -> list[dict[str, Any]]:
    return [{
        "workload": "chat", "outcome": "ok", "scheduled_ts": float(t), "sent_ts": float(t),
        "end_ts": float(t + s), "ttft_ms": 10.0, "e2e_ms": float(s * 1e3), "tpot_ms": 5.0,
        "input_tokens": 100, "output_tokens": 16, "itl_ms": [5.0] * 15,
    } for t, s in zip(arrivals, service_s, strict=True)]


def _manifest(duration_s: float, arrivals: int) -> dict[str, Any]:
    return {"run_id": "synthetic", "slo": {},
            "load": {"mode": "open", "rate_rps": None, "duration_s": duration_s},
            "counters": {"sent": arrivals, "dropped_arrivals": 0}}


def _poisson(rng: np.random.Generator, rate: float, start_s: float, end_s: float) -> np.ndarray:
    n = rng.poisson(rate * (end_s - start_s))
    return np.sort(rng.uniform(start_s, end_s, n))


def _late_start(rng: np.random.Generator, rate: float, window_s: float) -> np.ndarray:
    """Nothing for the first 30 % of the window (a slow set-up), then Poisson at the
    rate that keeps λ on average over the whole window."""
    return _poisson(rng, rate / 0.7, 0.3 * window_s, window_s)


def _sparse_start(rng: np.random.Generator, rate: float, window_s: float) -> np.ndarray:
    """λ/10 in the first fifth of the window, the rest faster: λ on average."""
    fast = (rate * window_s - 0.02 * rate * window_s) / (0.8 * window_s)
    return np.concatenate([_poisson(rng, rate / 10, 0.0, 0.2 * window_s),
                           _poisson(rng, fast, 0.2 * window_s, window_s)])


def _low_rate(rng: np.random.Generator, rate: float, window_s: float) -> np.ndarray:
    """A plain Poisson process, few arrivals: gaps at either end are a large share."""
    return _poisson(rng, rate, 0.0, window_s)


@pytest.mark.parametrize(("arrivals_of", "rate", "window_s"), [
    (_late_start, 20.0, 10.0),
    (_sparse_start, 20.0, 10.0),
    (_low_rate, 0.5, 10.0),
    (_low_rate, 2.0, 10.0),
])
@pytest.mark.parametrize("seed", range(5))
def test_achieved_never_exceeds_offered_beyond_the_arrival_noise(
    arrivals_of: Any, rate: float, window_s: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    arrivals = T0 + arrivals_of(rng, rate, window_s)
    service = rng.uniform(0.05, 0.3, arrivals.size)
    run = _run(_rows(arrivals, service), _manifest(window_s, arrivals.size))
    total = summarise_run(run).total
    recorded_offered = arrivals.size / window_s  # what a sweep point records as offered
    assert total.req_per_s <= rate * (1 + K_SIGMA / math.sqrt(rate * window_s))
    assert total.req_per_s <= recorded_offered * (1 + 1e-12)
    assert total.window_s == window_s
    assert total.goodput_rps <= total.req_per_s
    assert total.output_tokens_per_s == pytest.approx(16 * total.req_per_s)


def test_at_saturation_the_drain_is_left_out() -> None:
    # 20 req/s offered for 10 s to a FIFO server that completes 10 req/s: the last
    # request ends 10 s after the sends stopped. The target carried 10 req/s.
    arrivals = T0 + np.arange(200) / 20.0
    ends = T0 + 0.1 + np.arange(200) / 10.0
    run = _run(_rows(arrivals, ends - arrivals), _manifest(10.0, 200))
    total = summarise_run(run).total
    assert total.req_per_s == pytest.approx(10.0, rel=0.02)
    assert total.ok == 200  # the drain's requests still count as requests


def test_every_workload_shares_the_runs_window() -> None:
    busy = _rows(T0 + np.arange(100) / 10.0, np.full(100, 0.1))
    rare = [dict(r, workload="rare") for r in _rows(np.array([T0 + 4.0]), np.array([0.2]))]
    run = _run(busy + rare, _manifest(10.0, 101))
    summary = summarise_run(run)
    by_name = {s.workload: s for s in summary.summaries}
    assert by_name["rare"].req_per_s == pytest.approx(0.1)  # not 1 request ÷ 0.2 s
    assert by_name["chat"].req_per_s + by_name["rare"].req_per_s == pytest.approx(
        by_name["all"].req_per_s)
    assert [s.workload for s in summary.workloads] == ["chat", "rare"]


def test_the_window_comes_from_the_manifest_then_the_records() -> None:
    rows = _rows(T0 + np.array([2.0, 3.0, 5.0]), np.array([0.5, 0.5, 1.0]))
    frame, _ = frame_from_rows(rows)
    from_load = window_of(frame, {"load": {"duration_s": 10.0}})
    assert (from_load.start_ts, from_load.end_ts, from_load.source) == (T0 + 2.0, T0 + 12.0,
                                                                        "manifest")
    bare_locust = window_of(frame, {"config": {"run_time": 8}})
    assert (bare_locust.duration_s, bare_locust.source) == (8.0, "manifest")
    from_records = window_of(frame, {"duration_s": 99.0})  # wall clock: set-up included
    assert (from_records.start_ts, from_records.duration_s) == (T0 + 2.0, 4.0)
    assert from_records.source == "records"
    assert from_records.counts(frame).all()


def test_without_timestamps_every_request_counts_over_the_manifests_length() -> None:
    rows = [{"workload": "chat", "outcome": "ok", "output_tokens": 4} for _ in range(6)]
    run = _run(rows, {"load": {"duration_s": 3.0}})
    window = measured_window(run)
    assert math.isnan(window.start_ts) and window.duration_s == 3.0
    assert summarise_run(run).total.req_per_s == pytest.approx(2.0)
    wall = measured_window(_run(rows, {"duration_s": 12.0}))
    assert (wall.duration_s, wall.source) == (12.0, "manifest wall clock")
    nothing = measured_window(_run(rows, {}))
    assert nothing.source == "none" and math.isnan(summarise_run(_run(rows, {})).total.req_per_s)


def test_summarise_run_judges_the_manifests_slos_unless_given_others() -> None:
    arrivals = T0 + np.arange(10, dtype=float)
    rows = _rows(arrivals, np.full(10, 0.5))
    for i, row in enumerate(rows):
        row["ttft_ms"] = 10.0 * (i + 1)
    run = _run(rows, dict(_manifest(10.0, 10), slo={"ttft_p99_ms": 55, "bogus": 1}))
    own = summarise_run(run)
    assert [r.target.key for r in own.slo_results] == ["ttft_p99_ms"]
    assert own.slo_results[0].met is False and own.notes and "bogus" in own.notes[0]
    assert int(own.good.sum()) == 5 and own.total.goodput_rps == pytest.approx(0.5)
    none = summarise_run(run, slos={})
    assert none.slo_results == [] and int(none.good.sum()) == 10


def test_a_run_without_records_still_has_a_total_row() -> None:
    frame, _ = frame_from_rows([])
    run = RunData(run_dir=Path("/nonexistent"), manifest={"load": {"duration_s": 5.0}},
                  requests=frame, itl=ItlColumn.empty(0), telemetry=_no_telemetry(),
                  microbench=None, requests_source="jsonl")
    summary = summarise_run(run)
    assert [s.workload for s in summary.summaries] == ["all"]
    assert (summary.total.requests, summary.total.req_per_s) == (0, 0.0)


def test_a_sampled_simulation_reports_the_whole_fleets_rates() -> None:
    # 100 req/s for 10 s on 8 replicas; the simulation ran 2 of them and kept a quarter
    # of their records: 1,000 arrivals → 250 on the 2 → 62 records, each one standing
    # for 16 requests
    rng = np.random.default_rng(5)
    arrivals = np.sort(rng.uniform(T0, T0 + 10.0, 62))
    manifest = dict(_manifest(10.0, 250),
                    simulation={"replicas": 8, "simulated_replicas": 2, "record_sample": 0.25})
    run = _run(_rows(arrivals, np.full(62, 0.01)), manifest)
    assert measured_window(run).weight == 16
    total = summarise_run(run).total
    assert total.req_per_s == pytest.approx(62 * 16 / 10.0)
    assert total.output_tokens_per_s == pytest.approx(62 * 16 * 16 / 10.0)
    assert total.requests == 62  # counts stay counts of records
    live = _run(_rows(arrivals, np.full(62, 0.01)), _manifest(10.0, 62))
    assert measured_window(live).weight == 1
    assert summarise_run(live).total.req_per_s == pytest.approx(6.2)


def test_a_run_stopped_early_ends_its_window_at_the_stop() -> None:
    """A signal 12 s into a 30 s plan: the rates are over the 12 s the load ran, and a
    stop noted after the planned end (the drain's) changes nothing."""
    arrivals = T0 + np.arange(0.0, 12.0, 0.5)
    rows = _rows(arrivals, np.full(arrivals.size, 0.2))
    stopped = {**_manifest(30.0, arrivals.size), "load_stopped_ts": T0 + 12.0}
    window = measured_window(_run(rows, stopped))
    assert (window.start_ts, window.duration_s) == (T0, 12.0)
    summary = summarise_run(_run(rows, stopped), slos={})
    ended = int((arrivals + 0.2 <= T0 + 12.0).sum())
    assert summary.total.req_per_s == pytest.approx(ended / 12.0)
    late = {**_manifest(30.0, arrivals.size), "load_stopped_ts": T0 + 31.0}
    assert measured_window(_run(rows, late)).duration_s == 30.0


def test_a_capped_request_bounded_run_was_offered_its_rate_not_its_drain() -> None:
    """`--rate 20 --max-concurrency 8 --requests 200`: the 200 arrivals were due over
    about 10 s; the cap let 8 at a time through, so the last ended 25 s in. Offered is
    the arrivals' own pace ((n − 1) gaps over first → last due time, here within the
    Poisson count's 4σ of 20), completed is the window's; offered over the 25 s window
    (the old figure, 8 req/s) would have said the target kept up."""
    rng = np.random.default_rng(7)
    due = T0 + np.sort(rng.uniform(0.0, 10.0, 200))
    served = T0 + np.linspace(0.5, 25.0, 200)  # a slot every 0.12 s, in arrival order
    rows = _rows(due, served - due)
    manifest = {"run_id": "capped", "slo": {},
                "load": {"mode": "open", "duration_s": 86400.0, "requests": 200}}
    total = summarise_run(_run(rows, manifest)).total
    assert total.offered_rps == pytest.approx(199 / (due.max() - due.min()))
    assert abs(total.offered_rps - 20.0) <= 4 * math.sqrt(200) / 10.0
    assert total.req_per_s == pytest.approx(200 / (served.max() - due.min()))
    assert total.req_per_s < 0.5 * total.offered_rps
