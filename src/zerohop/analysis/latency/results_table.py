"""The results block a `vllm bench serve` user knows, from zerohop's own figures.

Counts, the measured window's length, request / output-token / total-token throughput,
and the mean, median and chosen percentiles of TTFT, TPOT, ITL and E2E over the whole
run's `ok` requests. The definitions are zerohop's (`core/metrics.py`): TTFT is the
first content on the wire; ITL the pooled gaps between reads (a 0 ms gap, a token that
came in its predecessor's read, is none: vLLM's ITL is between the chunks it reads, and
`compare` and the report's headline judge the same); the rates count the requests that
ended inside the measured window, as the console table and the report do
(`analysis/latency/summary.py`). A percentile whose sample is smaller than it needs
(`core.metrics.needed_n`: p99 needs 100) is None, printed "-", as everywhere else.

One table, three renderings from `table_rows`: the console block, `results.csv` and
summary.json's `results`, so the three cannot disagree. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zerohop.analysis.latency.slo import SloResult
from zerohop.analysis.latency.summary import WorkloadSummary
from zerohop.analysis.run_data import ItlColumn, RunData
from zerohop.core.metrics import REQUEST_LATENCIES, needed_n, title
from zerohop.core.percentile_choice import DEFAULT_PERCENTILES_TEXT, parse_percentiles

PERCENTILES_KEY = "percentiles"  # the manifest's `config` key that holds the run's choice


@dataclass(frozen=True)
class LatencyStats:
    """One latency over the run's ok requests (ITL: over their pooled gaps)."""

    metric: str  # `ttft_ms`
    n: int
    mean: float | None
    median: float | None
    percentiles: tuple[tuple[float, float | None], ...]  # (99.0, value), in asked order


@dataclass(frozen=True)
class ResultsTable:
    successful: int
    failed: int
    duration_s: float
    input_tokens: int  # summed over the ok requests
    output_tokens: int
    request_rps: float
    output_tokens_per_s: float
    total_tokens_per_s: float  # input + output tokens per second
    goodput_rps: float | None  # None when no objective judged the run
    latencies: tuple[LatencyStats, ...]
    percentiles: tuple[float, ...]


def run_percentiles(manifest: Mapping[str, Any]) -> tuple[float, ...]:
    """The percentiles the run asked for (its `--percentiles`), else the default; a run
    recorded before the flag, or by Locust alone, gets the default."""
    config = manifest.get("config")
    text = config.get(PERCENTILES_KEY) if isinstance(config, Mapping) else None
    try:
        return parse_percentiles(text if isinstance(text, str) and text else
                                 DEFAULT_PERCENTILES_TEXT)
    except ValueError:
        return parse_percentiles(DEFAULT_PERCENTILES_TEXT)


def run_results_table(run: RunData, total: WorkloadSummary,
                      slo_results: Sequence[SloResult]) -> ResultsTable:
    """The block of a loaded run, at the percentiles it asked for."""
    return results_table(run.requests, run.itl, total, run_percentiles(run.manifest),
                         judged=bool(slo_results))


def results_table(requests: pd.DataFrame, itl: ItlColumn, total: WorkloadSummary,
                  percentiles: tuple[float, ...], *, judged: bool) -> ResultsTable:
    """The block for the run whose run-wide summary row is `total`; `judged`: some
    objective decided which requests were good (else no goodput line)."""
    ok = (requests["outcome"] == "ok").to_numpy()
    latencies = []
    for metric in REQUEST_LATENCIES:
        if metric == "itl_ms":  # between reads, as vLLM's chunks, compare and the report
            gaps = itl.pooled(ok)
            values = gaps[gaps > 0]
        else:
            values = requests[metric].to_numpy(dtype=float)[ok]
        latencies.append(latency_stats(metric, values, percentiles))
    return ResultsTable(
        successful=total.ok,
        failed=total.errors,
        duration_s=total.window_s,
        input_tokens=_token_sum(requests["input_tokens"], ok),
        output_tokens=_token_sum(requests["output_tokens"], ok),
        request_rps=total.req_per_s,
        output_tokens_per_s=total.output_tokens_per_s,
        total_tokens_per_s=total.input_tokens_per_s + total.output_tokens_per_s,
        goodput_rps=total.goodput_rps if judged else None,
        latencies=tuple(latencies),
        percentiles=percentiles,
    )


def latency_stats(metric: str, values: np.ndarray, percentiles: tuple[float, ...]) -> LatencyStats:
    """Mean, median and `percentiles` (numpy's linear interpolation, as every other
    percentile of the project) of the finite values; None where n is too small."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    n = int(finite.size)

    def at(q: float) -> float | None:
        return float(np.percentile(finite, q)) if n >= needed_n(q / 100.0) else None

    return LatencyStats(metric, n, float(finite.mean()) if n else None, at(50.0),
                        tuple((q, at(q)) for q in percentiles))


def table_rows(table: ResultsTable) -> list[tuple[str, str, float | int | None]]:
    """(label, unit, value) in the order the console prints them, as vLLM names them;
    a chosen p50 is the median's row, not a second one."""
    rows: list[tuple[str, str, float | int | None]] = [
        ("Successful requests", "", table.successful),
        ("Failed requests", "", table.failed),
        ("Benchmark duration", "s", table.duration_s),
        ("Total input tokens", "", table.input_tokens),
        ("Total generated tokens", "", table.output_tokens),
        ("Request throughput", "req/s", table.request_rps),
        ("Output token throughput", "tok/s", table.output_tokens_per_s),
        ("Total token throughput", "tok/s", table.total_tokens_per_s),
    ]
    if table.goodput_rps is not None:
        rows.append(("Request goodput", "req/s", table.goodput_rps))
    for stats in table.latencies:
        name = title(stats.metric)
        rows.append((f"Mean {name}", "ms", stats.mean))
        rows.append((f"Median {name}", "ms", stats.median))
        rows += [(f"P{q:g} {name}", "ms", value) for q, value in stats.percentiles
                 if q != 50.0]  # p50 is the median's row
    return rows


def table_document(table: ResultsTable) -> dict[str, Any]:
    """summary.json's `results` (docs/summary-json.md): the same figures, keyed."""
    return {
        "percentiles": list(table.percentiles),
        "successful_requests": table.successful,
        "failed_requests": table.failed,
        "duration_s": table.duration_s,
        "input_tokens": table.input_tokens,
        "output_tokens": table.output_tokens,
        "request_rps": table.request_rps,
        "output_tokens_per_s": table.output_tokens_per_s,
        "total_tokens_per_s": table.total_tokens_per_s,
        "goodput_rps": table.goodput_rps,
        "latency": [
            {"metric": s.metric, "n": s.n, "mean": s.mean, "median": s.median,
             "percentile_values": [value for _, value in s.percentiles]}
            for s in table.latencies
        ],
    }


def _token_sum(series: pd.Series, mask: np.ndarray) -> int:
    values = series.to_numpy(dtype=float)[mask]
    total = float(np.nansum(values))
    return int(total) if math.isfinite(total) else 0
