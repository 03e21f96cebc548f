"""The engine phases' bounds (`analysis.phase_bounds`) and the budget built on them, on
planted runs where a rank match is wrong: two workloads share every scrape interval, one
slow for its prefill (long prompts, no queue), the other for its queue (bursts, short
prompts). Every figure is checked against the planted truth, recomputed here."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.analysis.test_time_budget import T0, _band_members, _scrapes
from zerohop.analysis.server.engine_phases import phase_shares
from zerohop.analysis.server.phase_bounds import request_phases
from zerohop.analysis.server.time_budget import BANDS, RESOLVABLE_SHARE, time_budget

pytestmark = pytest.mark.unit

QUEUE = "vllm:request_queue_time_seconds"
PREFILL = "vllm:request_prefill_time_seconds"
DECODE = "vllm:request_decode_time_seconds"
NETWORK_MS = 4.0
LAG_MS = 0.3


def _mixed(seed: int = 5, n: int = 800) -> tuple[pd.DataFrame, pd.DataFrame,
                                                  dict[str, np.ndarray]]:
    """Requests of 'doc' (prefill 0.6–0.9 s, queue under 50 ms) and 'chat' (prefill
    20–100 ms, queued 0.5–2.0 s in bursts) finishing in the same scrape intervals."""
    rng = np.random.default_rng(seed)
    sent = T0 + np.sort(rng.uniform(0, 60, n))
    doc = rng.random(n) < 0.3
    burst = (np.floor(sent - T0) % 6) < 3
    queue = np.where(doc, rng.uniform(0.0, 0.05, n),
                     np.where(burst, rng.uniform(0.5, 2.0, n), rng.uniform(0.0, 0.02, n)))
    prefill = np.where(doc, rng.uniform(0.6, 0.9, n), rng.uniform(0.02, 0.1, n))
    decode = rng.uniform(0.2, 1.2, n)
    ttft_ms = (queue + prefill) * 1e3 + NETWORK_MS + LAG_MS
    e2e_ms = ttft_ms + decode * 1e3 + LAG_MS
    end = sent + e2e_ms / 1e3
    requests = pd.DataFrame({
        "workload": np.where(doc, "doc", "chat"), "outcome": "ok", "sent_ts": sent,
        "first_content_ts": sent + ttft_ms / 1e3, "end_ts": end, "ttft_ms": ttft_ms,
        "e2e_ms": e2e_ms, "server_timing": None,
    })
    server_end = end - 0.003
    until = float(end.max()) + 1
    rows = []
    for family, values in ((QUEUE, queue), (PREFILL, prefill), (DECODE, decode)):
        rows += _scrapes(list(zip(server_end, values, strict=True)), family, 1.0, until)
    for second in np.arange(T0 - 1, until + 1):
        for stat, value in (("mean", LAG_MS), ("max", 3 * LAG_MS)):
            rows.append({"ts": second + 0.5, "source": "loadgen:1",
                         "metric": "loadgen_loop_lag_ms", "labels": json.dumps({"stat": stat}),
                         "value": value})
    truth = {"queue": queue * 1e3, "prefill": prefill * 1e3, "decode": decode * 1e3}
    return requests, pd.DataFrame(rows), truth


def test_a_rank_match_misses_the_truth_where_workloads_share_an_interval() -> None:
    """Why the bounds exist: placing by TTFT rank gives a queued chat the doc's prefill."""
    requests, telemetry, truth = _mixed()
    shares = phase_shares(requests, telemetry, "ttft_ms", "prefill")
    assert shares is not None
    members = _band_members(requests, "chat", "ttft_ms", 0.85, 0.95)
    true_mean = truth["prefill"][members].mean()
    assert not shares.low_ms[members].mean() <= true_mean <= shares.high_ms[members].mean()


def test_every_part_of_every_band_holds_the_planted_truth() -> None:
    requests, telemetry, truth = _mixed()
    budget = time_budget(requests, telemetry)
    checked = unresolved = 0
    for workload in budget.workloads:
        for band in workload.bands:
            start, stop = next((s, e) for name, s, e in BANDS if name == band.band)
            members = _band_members(requests, workload.workload, band.metric, start, stop)
            latency = requests[band.metric].to_numpy()[members]
            for name in ("queue", "prefill", "decode"):
                part = band.part(name)
                if band.metric == "ttft_ms" and name == "decode":
                    assert part is None
                    continue
                assert part is not None
                true_mean = float(truth[name][members].mean())
                assert part.low_ms - 1e-6 <= true_mean <= part.high_ms + 1e-6, (
                    workload.workload, band.band, band.metric, name, part, true_mean)
                wide = bool(part.high_ms - part.low_ms > RESOLVABLE_SHARE * latency.mean())
                assert part.resolvable == (not wide)
                unresolved += wide
                checked += 1
            rest = band.part("unexplained")
            assert rest is not None
            # the planted rest: network (and a lag the client part holds)
            true_rest = NETWORK_MS + (LAG_MS if band.metric == "e2e_ms" else 0.0)
            assert rest.low_ms - 1e-6 <= true_rest <= rest.high_ms + 1e-6
            assert rest.mean_ms >= -band.noise_ms  # no negative rest beyond the noise
            assert band.noise_ms == pytest.approx(3 * LAG_MS)  # the client part's max
    assert checked == 2 * 3 * (2 + 3)  # workloads × bands × (TTFT's 2 + E2E's 3 parts)
    assert 0 < unresolved < checked  # the fast bands' queue and prefill are not resolved


def test_the_decode_follows_the_clients_own_first_to_last_time() -> None:
    requests, telemetry, truth = _mixed()
    phases = request_phases(requests, telemetry, {})
    assert phases is not None
    decode = phases.phases["decode"]
    placed = np.isfinite(decode.estimate)
    assert placed.mean() > 0.95
    error = np.abs(decode.estimate[placed] - truth["decode"][placed])
    assert float(np.median(error)) < 2.0  # ms, against decodes of 200–1,200 ms
    assert (decode.low[placed] <= truth["decode"][placed] + 1e-6).all()
    assert (truth["decode"][placed] <= decode.high[placed] + 1e-6).all()


def _two_requests(ttft_ms: tuple[float, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One scrape interval, two requests: queues 100 and 1,800 ms, prefills 50 ms."""
    ends = [T0 + 0.4, T0 + 0.6]
    rows = (_scrapes([(t, q) for t, q in zip(ends, (0.1, 1.8), strict=True)], QUEUE, 1.0,
                     T0 + 1)
            + _scrapes([(t, 0.05) for t in ends], PREFILL, 1.0, T0 + 1))
    requests = pd.DataFrame({"outcome": "ok", "end_ts": [e + 0.001 for e in ends],
                             "ttft_ms": list(ttft_ms),
                             "e2e_ms": [t + 10.0 for t in ttft_ms]})
    return requests, pd.DataFrame(rows)


def test_a_queue_only_one_request_can_hold_is_its_own_whatever_the_ranks() -> None:
    """TTFT 155 and 1,855 ms, 10 ms of overhead between them: the 1,800 ms wait fits only
    the slower; its bucket is (1.5, 2.0] s, capped by its TTFT; the exact sum 1,900 ms
    leaves the other at least 1,900 − 1,855."""
    requests, telemetry = _two_requests((155.0, 1855.0))
    phases = request_phases(requests, telemetry, {})
    assert phases is not None
    queue = phases.phases["queue"]
    assert queue.low[1] == pytest.approx(1900.0 - 155.0)  # the other at most its TTFT
    assert queue.high[1] == pytest.approx(1855.0)
    assert queue.low[0] == pytest.approx(1900.0 - 1855.0)
    assert queue.high[0] == pytest.approx(155.0)
    assert queue.estimate.sum() == pytest.approx(1900.0)  # the histogram's exact sum
    engine = queue.estimate + phases.phases["prefill"].estimate
    assert engine == pytest.approx(np.array([155.0, 1855.0]) - 10.0 / 2)  # overhead shared
    assert phases.engine_low["ttft_ms"] == pytest.approx([145.0, 1845.0])
    assert phases.engine_high["ttft_ms"] == pytest.approx([155.0, 1855.0])


def test_a_bucket_range_as_many_requests_can_reach_as_it_gained_holds_them_all() -> None:
    """Five short requests (queue 10 ms, prefill 270 ms) and two queued ones (1,600 and
    1,700 ms), 200 ms of network each. (1.5, 2.0] s gained two and only the two TTFTs of
    1,840 and 1,940 ms reach it, so both are in it: 1,500 ms at least. Neither the sum
    (3,350 − 2,000 − 5 × 300 < 0) nor TTFT less the whole overhead (1,840 − 1,400 − 300
    = 140 ms) says as much."""
    ends = [T0 + 0.1 * k for k in range(1, 8)]
    queues = [0.01] * 5 + [1.6, 1.7]
    prefills = [0.27] * 5 + [0.04, 0.04]
    rows = (_scrapes(list(zip(ends, queues, strict=True)), QUEUE, 1.0, T0 + 1)
            + _scrapes(list(zip(ends, prefills, strict=True)), PREFILL, 1.0, T0 + 1))
    ttft = [(q + p) * 1e3 + 200.0 for q, p in zip(queues, prefills, strict=True)]
    requests = pd.DataFrame({"outcome": "ok", "end_ts": [e + 0.001 for e in ends],
                             "ttft_ms": ttft, "e2e_ms": [t + 10.0 for t in ttft]})
    phases = request_phases(requests, pd.DataFrame(rows), {})
    assert phases is not None
    queue = phases.phases["queue"]
    assert queue.low[5:] == pytest.approx([1500.0, 1500.0])
    assert (queue.high[:5] <= 300.0).all()


def test_an_interval_whose_counts_disagree_joins_the_next() -> None:
    """The server counts a request before the client sees its end: the first interval
    has one observation more than the client saw in it, the next one fewer; joined,
    they agree and the bounds are the joint ones, not 0 to the latency."""
    ends = [T0 + 0.5, T0 + 0.999, T0 + 1.5]  # the second is seen by the client at 1.004
    rows = (_scrapes([(t, 0.2) for t in ends], QUEUE, 1.0, T0 + 2)
            + _scrapes([(t, 0.1) for t in ends], PREFILL, 1.0, T0 + 2))
    requests = pd.DataFrame({"outcome": "ok", "end_ts": [T0 + 0.505, T0 + 1.004, T0 + 1.505],
                             "ttft_ms": [302.0] * 3, "e2e_ms": [310.0] * 3})
    phases = request_phases(requests, pd.DataFrame(rows), {})
    assert phases is not None
    assert phases.engine_low["ttft_ms"] == pytest.approx([296.0] * 3)  # 302 − 3 × 2 ms
    queue = phases.phases["queue"]
    assert queue.estimate.sum() == pytest.approx(600.0)
    assert (queue.low <= 200.0).all() and (queue.high >= 200.0).all()
    assert np.isfinite(queue.estimate).all()


def test_counts_that_never_agree_leave_only_zero_to_the_latency() -> None:
    requests, telemetry = _two_requests((155.0, 1855.0))
    lone = requests.iloc[[1]].reset_index(drop=True)  # the server saw two, the client one
    phases = request_phases(lone, telemetry, {})
    assert phases is not None
    queue = phases.phases["queue"]
    assert (queue.low[0], queue.high[0]) == (0.0, 1855.0)
    assert phases.engine_low["ttft_ms"][0] == 0.0

