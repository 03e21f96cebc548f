"""The saturation detector on hand-made observations: each signal alarms on its own
evidence, and only after a whole window of it (`analysis/server/saturation.py`)."""

from __future__ import annotations

import pytest

from zerohop.analysis.server.saturation import (
    DROPPED,
    FIRST_TOKEN_WAIT,
    SERVER_QUEUE,
    Observation,
    SaturationDetector,
)

pytestmark = pytest.mark.unit
RATE = 20  # arrivals a second


def feed(detector: SaturationDetector, seconds: int, *, served: float, start: int = 0,
         ttft_s: float = 0.1, queue: bool = False, dropped_per_s: int = 0,
         state: dict[str, float] | None = None) -> dict[str, float]:
    """`seconds` of RATE arrivals a second of which `served` a second are answered
    (FIFO): the backlog, the oldest wait and the queue follow from those counts."""
    s = state or {"offered": 0.0, "answered": 0.0, "dropped": 0.0}
    for t in range(start, start + seconds):
        s["offered"] += RATE + dropped_per_s
        s["dropped"] += dropped_per_s
        s["answered"] = min(s["answered"] + served, s["offered"] - s["dropped"])
        backlog = s["offered"] - s["dropped"] - s["answered"]
        wait = backlog / RATE + ttft_s  # FIFO: the oldest arrived backlog/RATE s ago
        detector.observe(Observation(
            t_s=float(t + 1), offered=int(s["offered"]), completed=int(s["answered"]),
            answered=int(s["answered"]), dropped=int(s["dropped"]),
            oldest_wait_s=wait, first_token_s=ttft_s,
            server_queue=backlog if queue else None))
    return s


def test_an_overload_is_found_after_one_window_with_its_onset_and_rate() -> None:
    detector = SaturationDetector()
    state = feed(detector, 60, served=RATE)  # a minute that keeps up
    assert not detector.verdict.saturated
    feed(detector, 60, served=RATE * 2 / 3, start=60, state=state)  # then 1.5x capacity
    verdict = detector.verdict
    assert verdict.saturated and verdict.signal == FIRST_TOKEN_WAIT
    # the wait passes its 1 s floor once 14 requests wait (0.1 s + 14/20 s... 0.7 s later)
    # and the window of evidence is 15 s long after that
    onset = next(t for t in range(1, 61) if (RATE / 3) * t / RATE + 0.1 > 1.0)
    assert verdict.since_s == pytest.approx(60 + onset, abs=1)
    assert verdict.detected_s == pytest.approx(60 + onset + 15, abs=1)
    assert verdict.offered_rps == pytest.approx(RATE)


def test_a_steady_load_and_a_drained_burst_never_alarm() -> None:
    detector = SaturationDetector()
    state = feed(detector, 600, served=RATE)
    state = feed(detector, 10, served=RATE / 2, start=600, state=state)  # a 10 s burst
    feed(detector, 120, served=RATE * 1.5, start=610, state=state)  # drained at 1.5x
    assert not detector.verdict.saturated


def test_a_wait_over_its_floor_that_does_not_grow_is_not_saturation() -> None:
    """A long prefill: every request waits 3 s for its first token, and keeps up."""
    detector = SaturationDetector()
    feed(detector, 300, served=RATE, ttft_s=3.0)
    assert not detector.verdict.saturated
    assert detector.wait_floor_s() == pytest.approx(12.0)  # 4 quickest first tokens
    assert detector.window_s() == pytest.approx(15.0)


def test_the_servers_own_queue_and_dropped_arrivals_are_signals_too() -> None:
    queue = SaturationDetector()
    feed(queue, 120, served=RATE * 0.5, ttft_s=30.0, queue=True)  # wait floor 120 s
    assert queue.verdict.signal == SERVER_QUEUE
    drops = SaturationDetector()
    feed(drops, 60, served=RATE, dropped_per_s=2)
    assert drops.verdict.signal == DROPPED
    assert drops.verdict.since_s == pytest.approx(drops.verdict.detected_s - 15, abs=1)


def test_the_verdict_is_the_first_saturation_and_stays() -> None:
    detector = SaturationDetector()
    state = feed(detector, 60, served=RATE / 2)
    first = detector.verdict
    assert first.saturated
    feed(detector, 600, served=RATE * 3, start=60, state=state)  # it recovers
    assert detector.verdict == first
    assert not detector.now.saturated
    assert first.as_dict()["signal"] == FIRST_TOKEN_WAIT


def test_a_runs_records_replayed_give_the_verdict_of_what_it_saw() -> None:
    """Records of a queue served FIFO at 10 req/s of 15 offered: each arrival's first
    token comes when the ones before it are done. Replayed, the run is saturated from
    its start; the same records at 7.5 offered are not."""
    import numpy as np
    import pandas as pd

    from zerohop.analysis.server.saturation_replay import replay_verdict

    def records(offered_rps: float) -> pd.DataFrame:
        arrive = np.arange(0, 120, 1 / offered_rps)
        served = np.maximum(arrive, np.arange(arrive.size) / 10.0) + 0.05
        return pd.DataFrame({"scheduled_ts": 1000 + arrive,
                             "first_content_ts": 1000 + served,
                             "end_ts": 1000 + served + 2.0, "outcome": "ok"})

    verdict = replay_verdict(records(15.0))
    assert verdict.saturated and verdict.signal == FIRST_TOKEN_WAIT
    # the wait passes 1 s when the 1/3 s it gains a second has added up: t = 3 s
    assert verdict.since_s is not None and verdict.since_s <= 4
    assert verdict.offered_rps == pytest.approx(15.0, abs=0.1)
    assert not replay_verdict(records(7.5)).saturated


def test_the_replays_observations_are_what_a_plain_count_at_each_second_gives() -> None:
    """A second author: every count and age recomputed by masks over all records."""
    import numpy as np
    import pandas as pd

    from zerohop.analysis.server.saturation_replay import observations

    rng = np.random.default_rng(5)
    n = 400
    arrive = 100 + np.sort(rng.uniform(0, 60, n))
    first = arrive + rng.exponential(3, n)
    end = first + rng.exponential(5, n)
    first[rng.random(n) < 0.1] = np.nan  # failed before any content
    ok = np.where(np.isnan(first), "http_error", "ok")
    frame = pd.DataFrame({"scheduled_ts": arrive, "first_content_ts": first,
                          "end_ts": end, "outcome": ok}).sample(frac=1, random_state=1)
    answer = np.fmin(np.where(np.isnan(first), np.inf, first), end)
    seen = list(observations(frame))
    assert len(seen) == int(np.ceil(end.max() - arrive.min()))
    for obs in seen:
        now = arrive.min() + obs.t_s
        due = arrive <= now
        assert obs.offered == due.sum()
        assert obs.completed == (end <= now).sum()
        assert obs.answered == (answer <= now).sum()
        waiting = due & (answer > now)
        assert obs.oldest_wait_s == (pytest.approx(now - arrive[waiting].min())
                                     if waiting.any() else None)
        flying = due & (end > now)
        assert obs.oldest_in_flight_s == (pytest.approx(now - arrive[flying].min())
                                          if flying.any() else None)
        came = (first > now - 1) & (first <= now)
        assert obs.first_token_s == (pytest.approx(np.median(first[came] - arrive[came]))
                                     if came.any() else None)
        ended_ok = (ok == "ok") & (end > now - 1) & (end <= now)
        assert obs.e2e_s == (pytest.approx(np.median(end[ended_ok] - arrive[ended_ok]))
                             if ended_ok.any() else None)


def test_arrivals_a_cap_held_until_the_end_are_replayed_as_waiting() -> None:
    """What a `--max-concurrency` run sent was served at once; the rest of its 15 req/s
    waited for a slot until the end (not_sent). Its records alone look healthy; with the
    arrivals never sent the replay sees the backlog, as the live feed did."""
    from pathlib import Path

    import numpy as np
    import pandas as pd

    from zerohop.analysis.run_data import ItlColumn, RunData
    from zerohop.analysis.server.saturation_replay import saturation_figures

    due = 1000 + np.arange(0, 60, 1 / 15)
    sent = due[::3]  # the slot served every third arrival on time
    held = np.setdiff1d(due, sent)
    requests = pd.DataFrame({"scheduled_ts": sent, "sent_ts": sent,
                             "first_content_ts": sent + 0.05, "end_ts": sent + 0.1,
                             "outcome": "ok"})
    not_sent = pd.DataFrame({"workload": "flood", "scheduled_ts": held,
                             "end_ts": np.full(held.size, 1060.0)})

    def run(held_rows: pd.DataFrame) -> RunData:
        return RunData(run_dir=Path("run"), manifest={}, requests=requests,
                       itl=ItlColumn.empty(len(requests)), telemetry=pd.DataFrame(),
                       microbench=None, requests_source="parquet", not_sent=held_rows)

    alone = saturation_figures(run(not_sent.iloc[:0]))
    assert alone is not None and not alone["saturated"]
    with_held = saturation_figures(run(not_sent))
    assert with_held is not None and with_held["saturated"]
    assert with_held["signal"] == FIRST_TOKEN_WAIT
    assert with_held["offered_rps"] == pytest.approx(15.0, abs=0.5)
