"""The time budget on planted runs: requests whose queue, prefill and client lag are
known, the server's histograms built from them as a scraper would record them."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from zerohop.analysis.server.engine_phases import (
    BucketWindow,
    buckets_at,
    histogram_windows,
    matched_to_mean,
    phase_shares,
)
from zerohop.analysis.server.time_budget import NOT_RESOLVABLE, time_budget
from zerohop.analysis.server_timing import server_timing_ms
from zerohop.report.present_budget import budget_section

pytestmark = pytest.mark.unit

BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, math.inf)  # vLLM's first ones
T0 = 1_764_000_000.0
SOURCE = "prom-raw:127.0.0.1:8000"


def _scrapes(ts_of_value: list[tuple[float, float]], family: str, scrape_s: float,
             until: float) -> list[dict[str, object]]:
    """Cumulative _bucket/_sum/_count rows of `family` at every scrape, from
    (observation time, seconds) pairs."""
    rows: list[dict[str, object]] = []
    times = np.array([t for t, _ in ts_of_value])
    values = np.array([v for _, v in ts_of_value])
    for at in np.arange(T0, until + scrape_s, scrape_s):
        seen = values[times <= at]
        for le in BUCKETS:
            rows.append({"ts": at, "source": SOURCE, "metric": f"{family}_bucket",
                         "labels": json.dumps({"le": str(le), "model_name": "m"}),
                         "value": float((seen <= le).sum())})
        rows.append({"ts": at, "source": SOURCE, "metric": f"{family}_sum",
                     "labels": json.dumps({"model_name": "m"}), "value": float(seen.sum())})
    return rows


def _planted(seed: int = 3, n: int = 600) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray,
                                                    np.ndarray]:
    """Requests whose TTFT is queue + prefill + 4 ms (network) + the client's lag; the
    queue comes in bursts, so the slow requests are the queued ones."""
    rng = np.random.default_rng(seed)
    sent = T0 + np.sort(rng.uniform(0, 60, n))
    burst = (np.floor(sent - T0) % 10) < 2
    queue = np.where(burst, rng.uniform(0.6, 2.4, n), rng.uniform(0.0, 0.02, n))
    prefill = rng.uniform(0.05, 0.25, n)
    lag_ms = 0.3
    ttft_ms = (queue + prefill) * 1e3 + 4.0 + lag_ms
    decode = rng.uniform(0.4, 0.6, n)
    e2e_ms = ttft_ms + decode * 1e3
    end = sent + e2e_ms / 1e3
    requests = pd.DataFrame({
        "workload": np.where(rng.random(n) < 0.5, "chat", "rag"), "outcome": "ok",
        "sent_ts": sent, "first_content_ts": sent + ttft_ms / 1e3, "end_ts": end,
        "ttft_ms": ttft_ms, "e2e_ms": e2e_ms, "server_timing": None,
    })
    until = float(end.max()) + 1
    server_end = end - 0.002  # the server finishes a moment before the client reads it
    rows = (_scrapes(list(zip(server_end, queue, strict=True)),
                     "vllm:request_queue_time_seconds", 1.0, until)
            + _scrapes(list(zip(server_end, prefill, strict=True)),
                       "vllm:request_prefill_time_seconds", 1.0, until)
            + _scrapes(list(zip(server_end, decode, strict=True)),
                       "vllm:request_decode_time_seconds", 1.0, until))
    for second in np.arange(T0 - 1, until + 1):
        for stat, value in (("mean", lag_ms), ("max", 3 * lag_ms)):
            rows.append({"ts": second + 0.5, "source": "loadgen:1", "metric":
                         "loadgen_loop_lag_ms", "labels": json.dumps({"stat": stat}),
                         "value": value})
    return requests, pd.DataFrame(rows), queue * 1e3, prefill * 1e3


def _band_members(requests: pd.DataFrame, workload: str, metric: str, start: float,
                  stop: float) -> np.ndarray:
    mine = requests.index[requests["workload"] == workload].to_numpy()
    ordered = mine[np.argsort(requests.loc[mine, metric].to_numpy(), kind="stable")]
    first = math.floor(start * ordered.size)
    return ordered[first:max(first + 1, math.ceil(stop * ordered.size))]


def test_each_part_of_every_band_holds_the_planted_truth_within_its_interval() -> None:
    requests, telemetry, queue_ms, prefill_ms = _planted()
    budget = time_budget(requests, telemetry)
    assert [w.workload for w in budget.workloads] == ["chat", "rag"]
    bands_seen = 0
    for workload in budget.workloads:
        for band in workload.bands:
            start, stop = {"p50": (0.4, 0.6), "p90": (0.85, 0.95), "p99": (0.98, 1.0)}[band.band]
            members = _band_members(requests, workload.workload, band.metric, start, stop)
            assert band.n == members.size
            for name, truth in (("queue", queue_ms), ("prefill", prefill_ms)):
                part = band.part(name)
                assert part is not None and part.aggregate and part.n == band.n
                true_mean = float(truth[members].mean())
                assert part.low_ms <= true_mean <= part.high_ms, (band, name, true_mean)
            client = band.part("client")
            assert client is not None and client.mean_ms == pytest.approx(0.3)
            parts_sum = sum(p.mean_ms for p in band.parts)
            assert parts_sum == pytest.approx(band.latency_ms)  # unexplained closes it
            bands_seen += 1
    assert bands_seen == 2 * 2 * 3  # workloads × (TTFT, E2E) × bands


def test_the_p99_band_gets_the_long_waits_not_the_average_one() -> None:
    requests, telemetry, _, _ = _planted()
    budget = time_budget(requests, telemetry)
    ttft = {b.band: b for b in budget.workloads[0].bands if b.metric == "ttft_ms"}
    p50, p99 = ttft["p50"].part("queue"), ttft["p99"].part("queue")
    assert p50 is not None and p99 is not None
    assert p99.mean_ms > 600 > 100 > p50.mean_ms
    assert p99.mean_ms > 0.7 * ttft["p99"].latency_ms  # the queue is most of the p99


def test_decode_is_an_e2e_part_only_and_unexplained_holds_the_network() -> None:
    requests, telemetry, _, _ = _planted()
    bands = time_budget(requests, telemetry).workloads[1].bands
    assert all(b.part("decode") is None for b in bands if b.metric == "ttft_ms")
    e2e_p50 = next(b for b in bands if b.metric == "e2e_ms" and b.band == "p50")
    assert e2e_p50.part("decode") is not None
    unexplained = e2e_p50.part("unexplained")
    assert unexplained is not None
    assert unexplained.low_ms <= 4.0 <= unexplained.high_ms  # the planted network time


def test_a_server_without_histograms_leaves_queue_unexplained_and_says_so() -> None:
    requests, telemetry, _, _ = _planted()
    telemetry = telemetry[telemetry["metric"] == "loadgen_loop_lag_ms"]
    budget = time_budget(requests, telemetry)
    band = budget.workloads[0].bands[0]
    assert [p.name for p in band.parts] == ["client", "unexplained"]
    assert any(note.startswith("queue: the server keeps no queue histogram")
               for note in budget.notes)


def test_a_layer_server_timing_is_the_hop_measured_per_request() -> None:
    requests, telemetry, _, _ = _planted()
    requests["server_timing"] = [f'layer;dur={1.0 + (i % 3)}, route;desc="r1"'
                                 for i in range(len(requests))]
    band = time_budget(requests, telemetry).workloads[0].bands[0]
    hop = band.part("hop")
    assert hop is not None and not hop.aggregate
    assert 1.0 <= hop.low_ms <= hop.mean_ms <= hop.high_ms <= 3.0


def test_bucket_placement_reads_ranks_inside_their_bucket_and_keeps_the_exact_mean() -> None:
    window = BucketWindow(0.0, 1.0, np.array([0.3, 0.5, math.inf]),
                          np.array([2.0, 4.0, 4.0]), mean_s=0.2)
    placed = np.column_stack(buckets_at(window, np.array([0.25, 0.75])))
    assert placed == pytest.approx(np.array([[0.15, 0.0, 0.3], [0.4, 0.3, 0.5]]))
    top = BucketWindow(0.0, 1.0, np.array([0.3, math.inf]), np.array([0.0, 2.0]), 9.0)
    assert [float(v[0]) for v in buckets_at(top, np.array([0.5]))] == [0.3, 0.3, math.inf]
    values = np.array([0.075, 0.225])  # two waits placed in the 0–300 ms bucket
    matched = matched_to_mean(values, np.zeros(2), np.full(2, 0.3), mean=0.005)
    assert matched.mean() == pytest.approx(0.005)
    assert (matched >= 0).all() and (matched <= 0.3).all()
    # a wait pinned at its bucket's lower edge: the others take up the rest
    edged = matched_to_mean(np.array([0.1, 0.2, 0.4]), np.array([0.0, 0.0, 0.3]),
                            np.array([0.3, 0.3, 0.5]), mean=0.15)
    assert edged.mean() == pytest.approx(0.15)
    assert edged[2] == pytest.approx(0.3) and edged[0] < edged[1] < 0.3
    # placed at their upper edges, they must still come down to the exact mean
    down = matched_to_mean(np.array([0.2, 0.3]), np.zeros(2), np.array([0.2, 0.3]), 0.01)
    assert down.mean() == pytest.approx(0.01)


def test_server_timing_is_read_per_entry() -> None:
    header = 'gw;desc="edge";dur=1.25, layer;dur=5.031'
    assert server_timing_ms(header, "layer") == pytest.approx(5.031)
    assert server_timing_ms(header, "gw") == pytest.approx(1.25)
    assert server_timing_ms(header, "db") is None
    assert server_timing_ms("layer;dur=soon", "layer") is None
    assert server_timing_ms(None, "layer") is None


def test_a_request_that_ended_just_after_a_scrape_is_placed_in_the_window_before() -> None:
    """The server counts a request before its last bytes reach the client: one counted
    just before a scrape can end, for the client, in an interval where the server saw
    nothing (a real vLLM run left 3 of a p90 band's 9 requests unplaced so)."""
    family = "vllm:request_queue_time_seconds"
    server_end = [T0 + 0.4, T0 + 0.999]  # both counted by the scrape at T0 + 1
    rows = _scrapes([(t, 0.4) for t in server_end], family, 1.0, T0 + 3)
    telemetry = pd.DataFrame(rows)
    windows = histogram_windows(telemetry, family)
    assert [(w.start_ts - T0, w.end_ts - T0) for w in windows] == [(0.0, 3.0)]
    requests = pd.DataFrame({"outcome": "ok", "end_ts": [T0 + 0.401, T0 + 1.003],
                             "ttft_ms": [500.0, 600.0]})
    shares = phase_shares(requests, telemetry, "ttft_ms", "queue")
    assert shares is not None and np.isfinite(shares.estimate_ms).all()
    assert shares.estimate_ms.mean() == pytest.approx(400.0)


def test_an_interleaved_comparison_prices_the_hop_per_arm() -> None:
    """A layer of 4–6 ms on half the requests reads its own mean on its arm, not half of
    it pooled with the direct arm; the band's noise is the client part's upper edge and
    the hop's 95 % half-width, recomputed here."""
    requests, telemetry, _, _ = _planted()
    layer = np.arange(len(requests)) % 2 == 0
    hop_ms = 4.0 + (np.arange(len(requests)) // 2) % 3
    requests["arm"] = pd.Categorical(np.where(layer, "layer", "direct"))
    requests["server_timing"] = [f"layer;dur={h:.1f}" if on else None
                                 for h, on in zip(hop_ms, layer, strict=True)]
    budget = time_budget(requests, telemetry)
    assert [(w.workload, w.arm) for w in budget.workloads] == [
        ("chat", "direct"), ("chat", "layer"), ("rag", "direct"), ("rag", "layer")]
    for workload in budget.workloads:
        arm = requests[(requests["arm"] == workload.arm).to_numpy()]
        for band in workload.bands:
            start, stop = {"p50": (0.4, 0.6), "p90": (0.85, 0.95), "p99": (0.98, 1.0)}[band.band]
            members = _band_members(arm, workload.workload, band.metric, start, stop)
            hop, client = band.part("hop"), band.part("client")
            assert client is not None
            if workload.arm == "direct":
                assert hop is None and band.noise_ms == pytest.approx(client.high_ms)
                continue
            values = hop_ms[members]
            assert hop is not None and hop.n == band.n
            assert hop.mean_ms == pytest.approx(values.mean()) and 4.0 <= hop.mean_ms <= 6.0
            half = 1.96 * values.std(ddof=1) / math.sqrt(values.size)
            assert band.noise_ms == pytest.approx(client.high_ms + half)


def test_parts_a_server_sends_per_request_are_exact_and_close_the_sum() -> None:
    """`queue;dur`, `prefill;dur`, `decode;dur` (the virtual clock sends them): the
    budget reads them per request instead of the histograms; the rest is the network."""
    requests, telemetry, queue_ms, prefill_ms = _planted()
    decode_ms = requests["e2e_ms"].to_numpy() - requests["ttft_ms"].to_numpy()
    requests["server_timing"] = [f"queue;dur={q:.4f}, prefill;dur={p:.4f}, decode;dur={d:.4f}"
                                 for q, p, d in zip(queue_ms, prefill_ms, decode_ms,
                                                    strict=True)]
    budget = time_budget(requests, telemetry)
    assert not budget.notes
    for workload in budget.workloads:
        for band in workload.bands:
            start, stop = {"p50": (0.4, 0.6), "p90": (0.85, 0.95), "p99": (0.98, 1.0)}[band.band]
            members = _band_members(requests, workload.workload, band.metric, start, stop)
            queue = band.part("queue")
            assert queue is not None and not queue.aggregate and "Server-Timing" in queue.source
            assert queue.mean_ms == pytest.approx(queue_ms[members].mean(), abs=1e-3)
            rest = band.part("unexplained")
            assert rest is not None
            assert rest.mean_ms == pytest.approx(4.0, abs=1e-3)  # the planted network time


def test_a_phase_placed_for_none_of_a_band_is_not_resolvable_over_its_whole_latency() -> None:
    """A run that ends as it queues: the later a request, the longer its wait, and the
    server's last scrape came before the slowest requests ended. None of them is in a
    scrape interval, so their queue may have been anything from 0 to their latency: the
    budget says so for their bands (not a missing part, not a number)."""
    rng = np.random.default_rng(5)
    n = 400
    sent = T0 + np.sort(rng.uniform(0, 60, n))
    queue = (sent - T0) / 60 * 2.0  # s, growing with the run
    ttft_ms = (queue + 0.1) * 1e3
    end = sent + ttft_ms / 1e3 + 0.5
    requests = pd.DataFrame({
        "workload": "chat", "outcome": "ok", "sent_ts": sent,
        "first_content_ts": sent + ttft_ms / 1e3, "end_ts": end, "ttft_ms": ttft_ms,
        "e2e_ms": ttft_ms + 500.0, "server_timing": None,
    })
    last_scrape = T0 + 45.0
    telemetry = pd.DataFrame(_scrapes(list(zip(end - 0.002, queue, strict=True)),
                                      "vllm:request_queue_time_seconds", 1.0, last_scrape))
    budget = time_budget(requests, telemetry)
    section = budget_section(budget)
    assert section is not None
    texts = [text for w in section["workloads"] for row in w["table"] for text in row["parts"]]
    unplaced = 0
    for band in budget.workloads[0].bands:
        start, stop = {"p50": (0.4, 0.6), "p90": (0.85, 0.95), "p99": (0.98, 1.0)}[band.band]
        members = _band_members(requests, "chat", band.metric, start, stop)
        queue_part = band.part("queue")
        assert queue_part is not None, band
        true_mean = float(queue[members].mean()) * 1e3
        assert queue_part.low_ms <= true_mean <= queue_part.high_ms, (band, true_mean)
        if bool((end[members] > last_scrape).all()):
            latency = float(requests.loc[members, band.metric].mean())
            assert queue_part.n == 0 and not queue_part.resolvable, band
            assert queue_part.low_ms == 0.0 and queue_part.high_ms == pytest.approx(latency)
            unplaced += 1
        else:
            assert queue_part.n > 0
    assert unplaced == 4  # the p90 and p99 bands of TTFT and of E2E
    assert sum(text.startswith(f"queue: {NOT_RESOLVABLE}") for text in texts) >= unplaced
