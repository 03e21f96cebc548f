"""A finished run's saturation verdict: its records replayed, one observation a second,
through the same detector a live run feeds (`analysis.saturation`).

Every record carries its scheduled (or sent) time, its first content and its end, so at
each second the replay knows what the run saw then: the arrivals due, those answered and
ended, the oldest still waiting for a first token or an end, and the first tokens and
E2Es of that second. Arrivals a `--max-concurrency` cap held until the end
(`RunData.not_sent`) waited from their due time until they were turned away. Arrivals
dropped at an in-flight cap have no record: the replay sees only what was offered to
the client's queue (the live feed counts the drops). Every second's counts come
from sorted arrays at once (no Python loop over the records).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import RunData
from zerohop.analysis.server.saturation import Observation, SaturationDetector, Verdict
from zerohop.core.layout import SATURATION_STOP_KEY
from zerohop.core.records import NOT_SENT


def replay_verdict(requests: pd.DataFrame, *, step_s: float = 1.0) -> Verdict:
    """The verdict of `requests` (the records' columns scheduled_ts or sent_ts,
    first_content_ts, end_ts, outcome)."""
    detector = SaturationDetector()
    for obs in observations(requests, step_s=step_s):
        detector.observe(obs)
    return detector.verdict


def observations(requests: pd.DataFrame, *, step_s: float = 1.0) -> Iterator[Observation]:
    """What the run saw at the end of each step, with times from the first arrival."""
    arrive = _column(requests, "scheduled_ts")
    arrive = np.where(np.isfinite(arrive), arrive, _column(requests, "sent_ts"))
    keep = np.isfinite(arrive)
    if not keep.any():
        return
    # every column is taken in arrival order once, and each dropped when last used:
    # at ten million records each is 80 MB (issue 42)
    order = np.argsort(arrive[keep], kind="stable")
    if not keep.all():
        order = np.flatnonzero(keep)[order]
    arrive = arrive[order]
    first = _column(requests, "first_content_ts")[order]
    end = _column(requests, "end_ts")[order]
    ok = (requests["outcome"] == "ok").to_numpy()[order]
    del order, keep
    np.copyto(end, arrive, where=~np.isfinite(end))  # no end recorded: nothing to wait for
    answer = np.where(np.isfinite(first), first, np.inf)
    np.fmin(answer, end, out=answer)  # or an end
    t0 = float(arrive[0])
    steps = math.ceil((float(end.max()) - t0) / step_s)
    firsts = _per_step(first - arrive, first, t0, step_s, steps)
    del first
    e2e = end - arrive
    e2e[~ok] = np.nan
    e2es = _per_step(e2e, end, t0, step_s, steps)
    del e2e, ok
    nows = t0 + np.arange(1, steps + 1) * step_s
    offered = np.searchsorted(arrive, nows, side="right")
    completed = np.searchsorted(np.sort(end), nows, side="right")
    answered = np.searchsorted(np.sort(answer), nows, side="right")
    # the oldest request not yet answered (not yet ended): every one before it in arrival
    # order is, so it is the first whose running maximum of answer (end) times is later
    waiting = np.minimum(offered, np.searchsorted(np.maximum.accumulate(answer), nows,
                                                  side="right"))
    flying = np.minimum(offered, np.searchsorted(np.maximum.accumulate(end), nows,
                                                 side="right"))
    del end, answer
    for step in range(1, steps + 1):
        i, now = step - 1, float(nows[step - 1])
        yield Observation(
            t_s=now - t0, offered=int(offered[i]), completed=int(completed[i]),
            answered=int(answered[i]),
            oldest_wait_s=now - arrive[waiting[i]] if waiting[i] < offered[i] else None,
            first_token_s=firsts.get(step), e2e_s=e2es.get(step),
            oldest_in_flight_s=now - arrive[flying[i]] if flying[i] < offered[i] else None)


def saturation_figures(run: RunData) -> dict[str, Any] | None:
    """The run's saturation as summary.json and the report give it: the replayed
    verdict, and whether the load was stopped early on the live verdict
    (`--stop-when-saturated`: the manifest's `SATURATION_STOP_KEY`, the verdict the
    progress line acted on). None: a run with no record."""
    requests = run.requests
    if requests.empty:
        return None
    if not run.not_sent.empty:
        columns = ["scheduled_ts", "sent_ts", "first_content_ts", "end_ts", "outcome"]
        held = run.not_sent.assign(sent_ts=np.nan, first_content_ts=np.nan,
                                   outcome=NOT_SENT)
        requests = pd.concat([requests[columns].astype({"outcome": str}), held[columns]],
                             ignore_index=True)
    stop = run.manifest.get(SATURATION_STOP_KEY)
    stopped = stop if isinstance(stop, dict) else None
    return {**replay_verdict(requests).as_dict(), "stopped_early": stopped is not None,
            "live": stopped}


def _per_step(values: np.ndarray, at: np.ndarray, t0: float, step_s: float,
              steps: int) -> dict[int, float]:
    """The median of `values` per step of their time `at` (step k: (k-1, k] steps)."""
    valid = np.isfinite(values) & np.isfinite(at)
    if not valid.any():
        return {}
    step = at[valid]
    step -= t0
    step /= step_s
    np.clip(np.ceil(step, out=step), 1, steps, out=step)
    codes = step.astype(np.int32 if steps < 2**31 else np.int64)
    del step
    medians = pd.Series(values[valid]).groupby(codes).median()
    return {int(k): float(v) for k, v in medians.items()}


def _column(requests: pd.DataFrame, name: str) -> np.ndarray:
    if name not in requests:
        return np.full(len(requests), np.nan)
    return requests[name].to_numpy(dtype=float, na_value=np.nan)
