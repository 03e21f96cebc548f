"""Speculative decoding: how much of the draft the target accepted, and what the client
saw of it.

From the server's counters (vLLM V1's `vllm:spec_decode_*_total`, kept raw by the
telemetry), over the measured window: drafts, draft tokens and accepted tokens are the
sums of each counter's increases between two scrapes whose interval overlaps the window
(a decrease means the server restarted: the new value is the increase), so the
acceptance rate is accepted ÷ draft tokens and the mean accepted tokens per draft is
accepted ÷ drafts; per position, accepted at that position ÷ drafts. SGLang exports only
gauges of its last logging interval (`sglang:spec_accept_rate`, `spec_accept_length`):
their mean over the window's scrapes is given as the server's own figure.

From the records: a server that accepts drafts sends several tokens at once, so a
request's content events per read (`reads.py`) rise above 1; given per request (the
ok ones that ended in the window with at least two events), and pooled over the run
as the read-delivery section counts it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.latency.reads import summarise_reads
from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.measured_window import MeasuredWindow
from zerohop.analysis.quantiles import describe
from zerohop.analysis.run_data import ItlColumn, RunData, category_mask
from zerohop.analysis.server.engine_phases import raw_rows

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
SGLANG_ACCEPT_RATE = "sglang:spec_accept_rate"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"
_COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, ACCEPTED_PER_POS)
_GAUGES = (SGLANG_ACCEPT_RATE, SGLANG_ACCEPT_LENGTH)


@dataclass(frozen=True)
class SpecDecodeSummary:
    """One run's speculative decoding; NaN where the server does not say."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    per_position: tuple[float, ...]  # share of drafts accepted at position 0, 1, ...
    server_accept_rate: float  # SGLang's gauge, mean over the window
    server_accept_length: float  # SGLang's gauge (tokens per verification)
    requests: int  # requests behind the tokens-per-read figures
    tokens_per_read_p50: float
    tokens_per_read_p90: float
    tokens_per_read_mean: float
    tokens_per_read_pooled: float  # every ok request's events ÷ reads (reads.py)

    @property
    def acceptance_rate(self) -> float:
        """Accepted ÷ draft tokens (vLLM's counters), else SGLang's own rate."""
        if self.draft_tokens > 0:
            return self.accepted_tokens / self.draft_tokens
        return self.server_accept_rate

    @property
    def accepted_per_draft(self) -> float:
        return self.accepted_tokens / self.drafts if self.drafts > 0 else math.nan


def summarise_spec_decode(data: RunData, window: MeasuredWindow) -> SpecDecodeSummary | None:
    """The run's speculative decoding over `window`; None when the server exports no
    speculative-decoding series."""
    raw = _raw_spec_rows(data.telemetry)
    if raw.empty:
        return None
    counters = _counter_increases(raw[raw["name"].isin(_COUNTERS)], window)
    positions = sorted(p for name, p in counters if name == ACCEPTED_PER_POS)
    drafts = counters.get((DRAFTS, -1), math.nan)
    per_position = tuple(
        counters[(ACCEPTED_PER_POS, p)] / drafts if drafts > 0 else math.nan for p in positions
    )
    per_request = tokens_per_read_per_request(data.requests, data.itl, window)
    pooled = summarise_reads(data.requests, data.itl, [ALL_WORKLOADS])[0].tokens_per_read
    spread = describe(per_request)
    return SpecDecodeSummary(
        drafts=drafts,
        draft_tokens=counters.get((DRAFT_TOKENS, -1), math.nan),
        accepted_tokens=counters.get((ACCEPTED, -1), math.nan),
        per_position=per_position,
        server_accept_rate=_gauge_mean(raw, SGLANG_ACCEPT_RATE, window),
        server_accept_length=_gauge_mean(raw, SGLANG_ACCEPT_LENGTH, window),
        requests=spread.n,
        tokens_per_read_p50=spread.get("p50"),
        tokens_per_read_p90=spread.get("p90"),
        tokens_per_read_mean=spread.mean,
        tokens_per_read_pooled=pooled,
    )


def tokens_per_read_per_request(
    requests: pd.DataFrame, itl: ItlColumn, window: MeasuredWindow
) -> np.ndarray:
    """Content events per read of each ok request that ended in `window` and has at
    least one gap: events are its gaps + 1, reads its events less its 0 ms gaps (an
    event that came in the previous one's read)."""
    lengths = itl.lengths
    keep = (requests["outcome"] == "ok").to_numpy() & (lengths > 0) & window.counts(requests)
    zeros = itl.zero_counts()
    events = lengths + 1
    return (events / (events - zeros))[keep].astype(float)


def _raw_spec_rows(telemetry: pd.DataFrame) -> pd.DataFrame:
    """The raw speculative-decoding samples, with their name less `_total`."""
    if telemetry.empty:
        return pd.DataFrame(columns=["source", "ts", "name", "labels", "value"])
    spec = category_mask(telemetry["metric"], lambda m: m.str.removesuffix("_total").isin(
        _COUNTERS + _GAUGES))  # `_total`: as the text parser adds
    raw = telemetry[raw_rows(telemetry) & spec]
    return pd.DataFrame({
        "source": raw["source"].astype(str).to_numpy(),
        "ts": raw["ts"].to_numpy(dtype=float),
        "name": raw["metric"].astype(str).str.removesuffix("_total").to_numpy(),
        "labels": raw["labels"].astype(str).to_numpy(),
        "value": raw["value"].to_numpy(dtype=float),
    })


def _counter_increases(rows: pd.DataFrame, window: MeasuredWindow) -> dict[tuple[str, int], float]:
    """Per (counter, position; -1 for none): the sum over every labelled series of its
    increases between scrapes whose interval overlaps `window` (resets handled)."""
    out: dict[tuple[str, int], float] = {}
    for (_source, name, labels), series in rows.groupby(["source", "name", "labels"], sort=False):
        series = series.sort_values("ts")
        ts = series["ts"].to_numpy(dtype=float)
        value = series["value"].to_numpy(dtype=float)
        if ts.size < 2:
            continue
        increase = np.diff(value)
        increase = np.where(increase < 0, value[1:], increase)  # the server restarted
        inside = np.ones(increase.size, dtype=bool)
        if not math.isnan(window.start_ts):
            inside = (ts[1:] > window.start_ts) & (ts[:-1] < window.end_ts)
        key = (str(name), _position(str(labels)) if name == ACCEPTED_PER_POS else -1)
        out[key] = out.get(key, 0.0) + float(increase[inside].sum())
    return out


def _position(labels: str) -> int:
    try:
        return int(json.loads(labels).get("position", -1))
    except (ValueError, TypeError, AttributeError):
        return -1


def _gauge_mean(rows: pd.DataFrame, name: str, window: MeasuredWindow) -> float:
    picked = rows[rows["name"] == name]
    values = picked["value"].to_numpy(dtype=float)
    if not math.isnan(window.start_ts):
        ts = picked["ts"].to_numpy(dtype=float)
        values = values[(ts >= window.start_ts) & (ts <= window.end_ts)]
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else math.nan
