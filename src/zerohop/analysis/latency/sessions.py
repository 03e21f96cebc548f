"""What conversations, prefix caches, reasoning and tool calls did to a run: the cache
hit rate (from the responses' usage and from the server's own counters, on one time
axis), TTFT against the share of the prompt that was cached, TTFT and TPOT per turn,
per-session totals, the reasoning/answer split, and agent loops: TTFT and E2E per step,
steps per loop, and how the loops ended (an answer, the step cap, or neither: a failed
call or the end of the run).

Each part is None when the run has nothing for it (no cached counts, no turns, ...),
so a plain run's report shows none of it. Pure: reads a run's tables only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import FLOAT_COLUMNS
from zerohop.analysis.timeseries import Timeline, request_start_ts
from zerohop.core.records import AGENT_ANSWERED, AGENT_CAPPED

# Buckets of the cached share of a prompt, for TTFT against it.
CACHED_SHARE_EDGES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
# The server's prefix-cache counters as canonical telemetry rates (telemetry/canonical.py).
CACHE_HITS_METRIC = "prefix_cache_hit_tokens_per_s"
CACHE_QUERIES_METRIC = "prefix_cache_query_tokens_per_s"


@dataclass(frozen=True)
class ShareBucket:
    label: str  # "0–25 %"
    requests: int
    ttft_p50_ms: float
    ttft_p99_ms: float


@dataclass(frozen=True)
class CacheSummary:
    input_tokens: int  # over ok requests whose usage says how many were cached
    cached_tokens: int
    hit_rate: float  # cached ÷ input tokens, from usage
    server_hit_rate: float  # hits ÷ queries from /metrics over the run (NaN: no counters)
    by_share: list[ShareBucket]
    usage_series: np.ndarray  # per timeline window: cached ÷ input tokens (NaN: none)
    server_series: np.ndarray  # per timeline window: hits ÷ queries from /metrics


@dataclass(frozen=True)
class TurnRow:
    turn: int
    requests: int
    input_tokens_mean: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float


@dataclass(frozen=True)
class SessionTotals:
    sessions: int
    turns_mean: float
    session_time_p50_s: float  # first send → last end of the session
    session_time_p99_s: float
    tokens_mean: float  # input + output tokens over the session's requests


@dataclass(frozen=True)
class ReasoningSummary:
    requests: int  # ok requests that reasoned before answering
    ttft_p50_ms: float
    ttfo_p50_ms: float
    ttfo_p99_ms: float
    reasoning_tokens: int
    output_tokens: int  # of the same requests, reasoning included

    @property
    def reasoning_share(self) -> float:
        return self.reasoning_tokens / self.output_tokens if self.output_tokens else math.nan


@dataclass(frozen=True)
class AgentStep:
    step: int  # 1 for a loop's first model call
    requests: int  # ok calls at this step
    with_tool_calls: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float


@dataclass(frozen=True)
class AgentLoops:
    loops: int
    steps_mean: float  # model calls per loop
    steps_p50: float
    steps_max: int
    answered: int  # ended with an answer (no tool call)
    capped: int  # ended at the step cap, still calling a tool
    other: int  # ended by a failed call or the end of the run
    loop_time_p50_s: float  # first send → last end of the loop
    loop_time_p99_s: float


@dataclass(frozen=True)
class SessionAnalysis:
    cache: CacheSummary | None
    turns: list[TurnRow]
    sessions: SessionTotals | None
    reasoning: ReasoningSummary | None
    tool_calls: int
    agent_steps: list[AgentStep]
    agent_loops: AgentLoops | None = None


def summarise_sessions(
    requests: pd.DataFrame, telemetry: pd.DataFrame, timeline: Timeline
) -> SessionAnalysis | None:
    ok = _OkColumns(requests, np.flatnonzero((requests["outcome"] == "ok").to_numpy()))
    analysis = SessionAnalysis(
        cache=_cache(ok, telemetry, timeline),
        turns=_turns(ok),
        sessions=_sessions(requests),
        reasoning=_reasoning(ok),
        tool_calls=int(np.nansum(ok["tool_calls"].to_numpy(dtype=float))),
        agent_steps=_agent_steps(ok),
        agent_loops=_agent_loops(requests),
    )
    empty = (analysis.cache is None and not analysis.turns and analysis.sessions is None
             and analysis.reasoning is None and not analysis.tool_calls
             and not analysis.agent_steps and analysis.agent_loops is None)
    return None if empty else analysis


class _OkColumns:
    """The float columns of the ok requests, each copied at `rows` when first read
    (all this module reads of them): a copy of every column of ten million rows would
    be gigabytes, and a plain run reads few of them; a column no record filled stays
    one broadcast value."""

    def __init__(self, requests: pd.DataFrame, rows: np.ndarray) -> None:
        self._requests, self._rows = requests, rows
        self._taken: dict[str, pd.Series] = {}

    def __getitem__(self, name: str) -> pd.Series:
        if name not in self._taken:
            if name not in FLOAT_COLUMNS:
                raise KeyError(name)
            values = self._requests[name].to_numpy(dtype=float)
            if values.size and values.strides == (0,):  # one value for every row
                taken = np.broadcast_to(values[0], self._rows.size)
            else:
                taken = values[self._rows]
            self._taken[name] = pd.Series(taken, copy=False)
        return self._taken[name]

    def start_ts(self) -> np.ndarray:
        """`timeseries.request_start_ts` of these rows."""
        sent = self["sent_ts"].to_numpy(dtype=float)
        return np.where(np.isfinite(sent), sent, self["scheduled_ts"].to_numpy(dtype=float))


def _pct(values: np.ndarray, q: float) -> float:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if values.size else math.nan


def _mean(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else math.nan


def _cache(ok: _OkColumns, telemetry: pd.DataFrame, timeline: Timeline) -> CacheSummary | None:
    cached = ok["cached_tokens"].to_numpy(dtype=float)
    inputs = ok["input_tokens"].to_numpy(dtype=float)
    known = np.isfinite(cached) & np.isfinite(inputs) & (inputs > 0)
    if not known.any():
        return None
    cached, inputs, ttft = cached[known], inputs[known], ok["ttft_ms"].to_numpy(float)[known]
    share = np.clip(cached / inputs, 0.0, 1.0)
    buckets = []
    edges = CACHED_SHARE_EDGES
    for i, (low, high) in enumerate(itertools.pairwise(edges)):
        last = i == len(edges) - 2
        inside = (share >= low) & ((share <= high) if last else (share < high))
        if inside.any():
            buckets.append(ShareBucket(f"{low:.0%}–{high:.0%}", int(inside.sum()),
                                       _pct(ttft[inside], 50), _pct(ttft[inside], 99)))
    idx = timeline.index_of(ok.start_ts()[known])
    keep = idx >= 0
    sums_cached = np.bincount(idx[keep], weights=cached[keep], minlength=timeline.n)
    sums_input = np.bincount(idx[keep], weights=inputs[keep], minlength=timeline.n)
    with np.errstate(divide="ignore", invalid="ignore"):
        usage_series = np.where(sums_input > 0, sums_cached / sums_input, np.nan)
    server_rate, server_series = _server_hit_rate(telemetry, timeline)
    return CacheSummary(int(inputs.sum()), int(cached.sum()), float(cached.sum() / inputs.sum()),
                        server_rate, buckets, usage_series, server_series)


def _server_hit_rate(telemetry: pd.DataFrame, timeline: Timeline) -> tuple[float, np.ndarray]:
    """hits ÷ queries from the server's counters (both as per-second rates), per window
    and over the run; NaN where it exports no prefix-cache counters."""
    per_window = []
    for metric in (CACHE_HITS_METRIC, CACHE_QUERIES_METRIC):
        rows = telemetry[(telemetry["metric"] == metric).to_numpy()]
        values = rows["value"].to_numpy(dtype=float)
        idx = timeline.index_of(rows["ts"].to_numpy(dtype=float))
        keep = (idx >= 0) & np.isfinite(values)
        per_window.append(np.bincount(idx[keep], weights=values[keep], minlength=timeline.n))
    hits, queries = per_window
    with np.errstate(divide="ignore", invalid="ignore"):
        series = np.where(queries > 0, hits / queries, np.nan)
    total = float(hits.sum() / queries.sum()) if queries.sum() > 0 else math.nan
    return total, series


def _turns(ok: _OkColumns) -> list[TurnRow]:
    turn = ok["turn"].to_numpy(dtype=float)
    rows = []
    for k in np.unique(turn[np.isfinite(turn)]).astype(int):
        sel = turn == k
        ttft = ok["ttft_ms"].to_numpy(float)[sel]
        rows.append(TurnRow(
            int(k), int(sel.sum()), _mean(ok["input_tokens"].to_numpy(float)[sel]),
            _pct(ttft, 50), _pct(ttft, 99), _pct(ok["tpot_ms"].to_numpy(float)[sel], 50),
        ))
    return rows


def _per_session(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per session: its requests, first start, last end and tokens."""
    frame = pd.DataFrame({
        "session": rows["session_id"].astype(str).to_numpy(),
        "start": request_start_ts(rows),
        "end": rows["end_ts"].to_numpy(dtype=float),
        "tokens": np.nan_to_num(rows["input_tokens"].to_numpy(dtype=float))
        + np.nan_to_num(rows["output_tokens"].to_numpy(dtype=float)),
    })
    grouped = frame.groupby("session", sort=False)
    return pd.DataFrame({"requests": grouped.size(), "start": grouped["start"].min(),
                         "end": grouped["end"].max(), "tokens": grouped["tokens"].sum()})


def _sessions(requests: pd.DataFrame) -> SessionTotals | None:
    """Conversations (an agent loop's calls have their own summary)."""
    with_session = requests[(requests["session_id"].notna()
                             & requests["agent_step"].isna()).to_numpy()]
    if with_session.empty:
        return None
    per = _per_session(with_session)
    span = (per["end"] - per["start"]).to_numpy(dtype=float)
    return SessionTotals(len(per), float(per["requests"].mean()), _pct(span, 50),
                         _pct(span, 99), float(per["tokens"].mean()))


def _reasoning(ok: _OkColumns) -> ReasoningSummary | None:
    ttft = ok["ttft_ms"].to_numpy(dtype=float)
    ttfo = ok["ttfo_ms"].to_numpy(dtype=float)
    reasoning = ok["reasoning_tokens"].to_numpy(dtype=float)
    thought = np.isfinite(reasoning) & (reasoning > 0)
    if not thought.any():
        return None
    output = np.nan_to_num(ok["output_tokens"].to_numpy(dtype=float)[thought])
    return ReasoningSummary(int(thought.sum()), _pct(ttft[thought], 50), _pct(ttfo[thought], 50),
                            _pct(ttfo[thought], 99), int(reasoning[thought].sum()),
                            int(output.sum()))


def _agent_steps(ok: _OkColumns) -> list[AgentStep]:
    step = ok["agent_step"].to_numpy(dtype=float)
    calls = np.nan_to_num(ok["tool_calls"].to_numpy(dtype=float))
    ttft = ok["ttft_ms"].to_numpy(dtype=float)
    e2e = ok["e2e_ms"].to_numpy(dtype=float)
    rows = []
    for k in np.unique(step[np.isfinite(step)]).astype(int):
        sel = step == k
        rows.append(AgentStep(int(k), int(sel.sum()), int((sel & (calls > 0)).sum()),
                              _pct(ttft[sel], 50), _pct(ttft[sel], 99),
                              _pct(e2e[sel], 50), _pct(e2e[sel], 99)))
    return rows


def _agent_loops(requests: pd.DataFrame) -> AgentLoops | None:
    """Every agent loop (its calls of any outcome): how many steps it ran and how it
    ended, by the `agent_end` of its last call."""
    rows = requests[(requests["session_id"].notna() & requests["agent_step"].notna()
                     ).to_numpy()]
    if rows.empty:
        return None
    per = _per_session(rows)
    sessions = rows["session_id"].astype(str)
    steps = rows["agent_step"].astype(float).groupby(sessions.to_numpy(), sort=False).max()
    ends = rows["agent_end"].astype(object).to_numpy()
    answered = set(sessions[ends == AGENT_ANSWERED])
    capped = set(sessions[ends == AGENT_CAPPED]) - answered
    span = (per["end"] - per["start"]).to_numpy(dtype=float)
    counts = steps.to_numpy(dtype=float)
    return AgentLoops(len(per), _mean(counts), _pct(counts, 50), int(np.nanmax(counts)),
                      len(answered), len(capped), len(per) - len(answered) - len(capped),
                      _pct(span, 50), _pct(span, 99))
