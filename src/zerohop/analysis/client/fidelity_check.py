"""How far the client's timings are from what the target really sent: the client's
records joined with the embedded target's ground truth on request id.

Every error is the client's stamp minus the server's write time, on one machine's wall
clock: TTFT (the read that delivered the first content − the first token's write), E2E
(the read that delivered the terminator − the last token's write) and each inter-token
gap (the client's gap − the server's gap between the same two tokens). Only requests
both sides call ok count, and only those sent after the warm-up: the first requests of
a run pay for connections and imports that steady state does not.

The client's table needs request_id, outcome, sent_ts, first_content_ts, end_ts,
content_events and itl_ms (one sequence per row); the ground truth's needs request_id,
outcome, first_token_ts, last_token_ts and, for ITL errors, token_ts (every token's
write time, the target's `--ground-truth-token-lags`).

A client cannot read what arrived while its core was taken from it (a hypervisor's
steal, an interrupt storm): the kernel merges the bytes that waited and stamps them
with the last arrival. Where a probe recorded such windows, tokens written inside one
are not judged and are counted apart (`unjudged_tokens`), so the check measures the
client, not the machine under it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

LATE_GAP_MS = 1.0  # a gap whose error exceeds this counts as late (by stream position)
LATE_GAP_POSITIONS = 8


@dataclass(frozen=True)
class ErrorStats:
    """Percentiles of the error magnitude |client − server|, and the signed extremes
    (a negative `min_ms` means a read stamped before its write: a clock fault)."""

    n: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    min_ms: float

    @classmethod
    def of(cls, errors_ms: np.ndarray) -> ErrorStats:
        values = np.asarray(errors_ms, dtype=float)
        values = values[np.isfinite(values)]
        if values.size == 0:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        magnitude = np.abs(values)
        return cls(
            n=int(values.size),
            p50_ms=float(np.percentile(magnitude, 50)),
            p99_ms=float(np.percentile(magnitude, 99)),
            max_ms=float(magnitude.max()),
            min_ms=float(values.min()),
        )


@dataclass(frozen=True)
class TimingErrors:
    """The client's timing errors over the requests both sides saw succeed."""

    requests: int
    tokens: int
    events_per_s: float
    ttft: ErrorStats
    e2e: ErrorStats
    itl: ErrorStats
    itl_unpaired: int  # requests whose gaps could not be paired with the server's tokens
    late_gaps_by_position: tuple[int, ...]  # gaps > LATE_GAP_MS, by index in the stream
    late_gaps: int = 0  # all gaps > LATE_GAP_MS, wherever in the stream
    unjudged_tokens: int = 0  # written while the client's core was unavailable

    @property
    def ttft_p99_ms(self) -> float:
        return self.ttft.p99_ms

    @property
    def e2e_p99_ms(self) -> float:
        return self.e2e.p99_ms

    @property
    def itl_p99_ms(self) -> float:
        return self.itl.p99_ms


def joined_requests(
    client: pd.DataFrame, truth: pd.DataFrame, *, warmup_s: float = 0.0
) -> pd.DataFrame:
    """Client rows beside their ground truth (its columns suffixed `_srv` where both
    sides name one), ok on both sides and sent after `warmup_s` from the first send."""
    if client.empty or truth.empty:
        return pd.DataFrame()
    server = truth.drop_duplicates("request_id", keep="last")
    df = client.merge(server, on="request_id", suffixes=("", "_srv"))
    df = df[(df["outcome"] == "ok") & (df["outcome_srv"] == "ok")]
    if df.empty:
        return df
    sent = df["sent_ts"].to_numpy(dtype=float)
    return df[sent >= np.nanmin(sent) + warmup_s]


def timing_errors(
    client: pd.DataFrame,
    truth: pd.DataFrame,
    *,
    warmup_s: float = 0.0,
    unavailable: Sequence[tuple[float, float]] = (),
) -> TimingErrors:
    """The TTFT, E2E and ITL errors of the client against the ground truth; tokens
    written inside an `unavailable` window (wall-clock seconds) are not judged."""
    df = joined_requests(client, truth, warmup_s=warmup_s)
    if df.empty:
        empty = ErrorStats.of(np.array([]))
        return TimingErrors(0, 0, math.nan, empty, empty, empty, 0, ())
    windows = _Windows(unavailable)
    ttft = _ms(df["first_content_ts"]) - _ms(df["first_token_ts"])
    ttft[windows.covers(df["first_token_ts"])] = math.nan
    e2e = _ms(df["end_ts"]) - _ms(df["last_token_ts"])
    e2e[windows.covers(df["last_token_ts"])] = math.nan
    token_ts = df["token_ts"] if "token_ts" in df.columns else pd.Series([None] * len(df))
    itl_errors, unpaired, unjudged = _itl_errors(
        df["itl_ms"], df["content_events"], token_ts, windows)
    itl = np.concatenate(itl_errors) if itl_errors else np.array([])
    late = [np.flatnonzero(np.abs(e) > LATE_GAP_MS) for e in itl_errors]
    by_position = np.bincount(np.concatenate(late)) if late else np.array([], dtype=int)
    window_s = float(df["end_ts"].max() - df["sent_ts"].min())
    events = float(pd.to_numeric(df["content_events"], errors="coerce").fillna(0).sum())
    return TimingErrors(
        requests=len(df),
        tokens=int(itl.size) + len(df),
        events_per_s=events / window_s if window_s > 0 else math.nan,
        ttft=ErrorStats.of(ttft),
        e2e=ErrorStats.of(e2e),
        itl=ErrorStats.of(itl),
        itl_unpaired=unpaired,
        late_gaps_by_position=tuple(int(n) for n in by_position[:LATE_GAP_POSITIONS]),
        late_gaps=int(by_position.sum()),
        unjudged_tokens=unjudged,
    )


class _Windows:
    """[start, end] windows of wall-clock seconds, possibly overlapping."""

    def __init__(self, windows: Sequence[tuple[float, float]]) -> None:
        ordered = np.array(sorted((float(a), float(b)) for a, b in windows if b >= a))
        self.starts = ordered[:, 0] if ordered.size else ordered
        # the latest end among windows starting at or before each start
        self.ends = np.maximum.accumulate(ordered[:, 1]) if ordered.size else ordered

    def covers(self, times: pd.Series | np.ndarray) -> np.ndarray:
        if self.starts.size == 0:
            return np.zeros(len(times), dtype=bool)
        values = np.asarray(pd.to_numeric(times, errors="coerce"), dtype=float)
        i = np.searchsorted(self.starts, values, side="right") - 1
        inside = np.zeros(values.size, dtype=bool)
        known = i >= 0
        inside[known] = values[known] <= self.ends[i[known]]
        return inside


def _itl_errors(
    client_gaps: pd.Series, events: pd.Series, token_ts: pd.Series, windows: _Windows
) -> tuple[list[np.ndarray], int, int]:
    """Per request, the client's gaps minus the server's between the same tokens (a gap
    touching a token written in an unavailable window is not judged). A request pairs
    only when the client saw one content event per token written."""
    errors: list[np.ndarray] = []
    unpaired = unjudged = 0
    for gaps, n_events, written in zip(client_gaps, events, token_ts, strict=True):
        if not _is_sequence(written):
            continue  # the target kept no per-token times: no ITL errors to compute
        times = np.asarray(written, dtype=float)
        server_gaps = np.diff(times) * 1e3
        client = np.asarray(gaps if _is_sequence(gaps) else [], dtype=float)
        if int(n_events) != len(written) or client.size != server_gaps.size:
            unpaired += 1
            continue
        taken = windows.covers(times)
        unjudged += int(taken.sum())
        error = client - server_gaps
        error[taken[:-1] | taken[1:]] = math.nan
        errors.append(error)
    return errors, unpaired, unjudged


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence | np.ndarray) and not isinstance(value, str)


def _ms(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float) * 1e3
