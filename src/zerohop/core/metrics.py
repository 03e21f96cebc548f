"""The request-metric catalogue: every per-request figure and run rate the report,
the comparison, the nightly gates and the SLO grammar name, defined once.

Each `Metric` says what the figure is (unit, contract definition), which way is better,
how the pages title it, and which roles it plays: one of the four per-request
latencies every table, CDF and comparison shows, a schedule-based latency (open-loop
runs), a latency an SLO may name, a percentile drawn per time window, a figure the layer
budget or the nightly gates judge. Modules derive their lists from these roles instead
of writing their own, so adding a metric or renaming a title is one edit here. The
catalogue's order is the order tables, charts and the glossary list them in.

Pure Python (no pandas, no numpy): the command line, the Locust plugin and the report
all import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Better = Literal["lower", "higher", "neither"]
Group = Literal[
    "latency", "from_schedule", "client", "logical", "tokens", "answer", "rate", "per_user"
]


@dataclass(frozen=True)
class Metric:
    """One figure: `name` is the request column (or the run summary's field)."""

    name: str
    title: str  # how tables, charts and verdict lines name it
    unit: str
    better: Better
    group: Group
    description: str  # the metric contract's definition, as the glossary prints it
    slo: bool = False  # an SLO may name it (`<stem>_<statistic>_ms`)
    window_stats: tuple[str, ...] = ()  # percentiles drawn per time window
    layer: bool = False  # the layer budget reports what a layer adds to it
    gated: bool = False  # the nightly gates judge it unless the profile says otherwise
    summarised: bool = False  # summary.json gives its distribution per workload
    term: str = ""  # the glossary's term when it is not `name`

    @property
    def stem(self) -> str:
        """`ttft_ms` → `ttft`: the name as SLO keys and window columns spell it."""
        return self.name.removesuffix("_ms")

    @property
    def glossary_term(self) -> str:
        return self.term or self.name


CATALOGUE: tuple[Metric, ...] = (
    # --- the four per-request latencies ------------------------------------------------
    Metric(
        "ttft_ms", "TTFT", "ms", "lower", "latency",
        "Time to first token: actual send → first event that carries generated content "
        "(OpenAI: first non-empty delta.content/reasoning_content/text; Anthropic: first "
        "content_block_delta). Role-only chunks, message_start and ping do not count.",
        slo=True, window_stats=("p50", "p90", "p99"), layer=True, gated=True, summarised=True,
    ),
    Metric(
        "tpot_ms", "TPOT", "ms", "lower", "latency",
        "Time per output token: (e2e − ttft) ÷ (output_tokens − 1), only where "
        "output_tokens ≥ 2.",
        slo=True, window_stats=("p50", "p99"), gated=True, summarised=True,
    ),
    Metric(
        "itl_ms", "ITL", "ms", "lower", "latency",
        "Inter-token latency: gaps between consecutive content events, pooled across all "
        "ok requests for percentiles; tokens_per_event shows multi-token chunks. "
        "Comparison intervals for ITL treat gaps as independent, so they are optimistic.",
        slo=True, summarised=True,
    ),
    Metric(
        "e2e_ms", "E2E", "ms", "lower", "latency",
        "End to end: actual send → stream terminator ([DONE] / message_stop).",
        slo=True, window_stats=("p50", "p99"), layer=True, gated=True,
        summarised=True,
    ),
    # --- measured from the schedule (open loop) ----------------------------------------
    Metric(
        "ttft_from_schedule_ms", "TTFT from schedule", "ms", "lower", "from_schedule",
        "TTFT measured from the scheduled time: the coordinated-omission-aware figure.",
        slo=True, summarised=True,
    ),
    Metric(
        "e2e_from_schedule_ms", "E2E from schedule", "ms", "lower", "from_schedule",
        "E2E measured from the scheduled time (coordinated-omission aware).",
        slo=True, summarised=True,
    ),
    # --- the client's own timing --------------------------------------------------------
    Metric(
        "schedule_lag_ms", "schedule lag", "ms", "lower", "client",
        "sent − (scheduled + queue wait), for open-loop runs: how late the client sent "
        "once it could.",
    ),
    Metric(
        "queue_wait_ms", "queue wait", "ms", "lower", "client",
        "With --max-concurrency: how long an arrival that found every slot taken (or "
        "others already waiting) waited for one, from its scheduled time; 0 for one that "
        "found a slot free. Part of the latencies from schedule, not of TTFT or E2E.",
        summarised=True,
    ),
    # --- logical requests (client policies) ---------------------------------------------
    Metric(
        "logical_e2e_ms", "logical E2E", "ms", "lower", "logical",
        "First attempt's send → the final attempt's end, retries and backoff waits "
        "included, over every finished logical request (answered or not).",
        term="logical E2E",
    ),
    Metric(
        "logical_ttft_ms", "answered TTFT", "ms", "lower", "logical",
        "First attempt's send → first content of the attempt that answered, retries and "
        "backoff waits included, over answered logical requests.",
        term="answered TTFT",
    ),
    # --- token counts -------------------------------------------------------------------
    Metric(
        "input_tokens", "input tokens", "tokens", "neither", "tokens",
        "Prompt tokens: from the server's usage fields when sent, otherwise counted "
        "(token_source says which).",
    ),
    Metric(
        "output_tokens", "output tokens", "tokens", "neither", "tokens",
        "Answer tokens: from the server's usage fields when sent, otherwise counted "
        "(token_source says which).",
    ),
    Metric(
        "items", "batch size", "items", "neither", "tokens",
        "A pooling request (embedding, rerank): the texts it carried, inputs embedded or "
        "documents ranked. items/s is the items of ok requests ÷ measured window.",
        summarised=True,
    ),
    Metric(
        "counted_output_tokens", "client output tokens", "tokens", "neither", "tokens",
        "The client's own count of the answer: content events × tokens per event, shown "
        "beside the server's usage in Token counts.",
    ),
    # --- what the answer held: thinking and tool calls ----------------------------------
    Metric(
        "ttfo_ms", "TTFO", "ms", "lower", "answer",
        "Time to first output token: actual send → first event that carries answer "
        "content after any reasoning (OpenAI: delta.content or tool-call arguments, not "
        "reasoning_content/reasoning; Anthropic: text_delta or input_json_delta, not "
        "thinking_delta). Equal to TTFT when nothing was reasoned first; none when only "
        "reasoning came.",
        slo=True, summarised=True,
    ),
    Metric(
        "reasoning_tokens", "reasoning tokens", "tokens", "neither", "answer",
        "Output tokens spent thinking: usage.completion_tokens_details.reasoning_tokens "
        "when the server sends a count, otherwise counted from the reasoning events "
        "(events × tokens per event); part of output_tokens.",
    ),
    Metric(
        "tool_calls", "tool calls", "calls", "neither", "answer",
        "Distinct tool calls the response asked for: OpenAI tool_calls entries by index, "
        "Anthropic tool_use content blocks.",
    ),
    # --- what one user sees -------------------------------------------------------------
    Metric(
        "output_tokens_per_s_per_user", "output tokens/s per user", "tokens/s", "higher",
        "per_user",
        "The decode rate one user sees after the first token: (output_tokens − 1) ÷ "
        "(e2e − ttft) = 1000 ÷ TPOT, per ok request with at least 2 output tokens "
        "(AIPerf's output token throughput per user).",
        summarised=True,
    ),
    # --- run rates (per workload, over its measured window) -----------------------------
    Metric(
        "req_per_s", "ok req/s", "req/s", "higher", "rate",
        "ok requests ÷ measured window.",
        term="req/s",
    ),
    Metric(
        "input_tokens_per_s", "input tokens/s", "tokens/s", "higher", "rate",
        "Input (prompt) tokens of ok requests ÷ measured window.",
        term="input tokens/s",
    ),
    Metric(
        "output_tokens_per_s", "output tokens/s", "tokens/s", "higher", "rate",
        "Output tokens of ok requests ÷ measured window.",
        term="output tokens/s",
    ),
    Metric(
        "goodput_rps", "goodput", "req/s", "higher", "rate",
        "Requests meeting every SLO ÷ measured window. A request meets an SLO such as "
        "ttft_p99_ms=500 when its own value is ≤ 500 ms (no TPOT — one token — passes the "
        "TPOT objective; for ITL the request's largest gap must meet it); only ok requests "
        "can be good.",
        term="goodput",
    ),
    Metric(
        "good_fraction", "good fraction", "fraction", "higher", "rate",
        "Requests meeting every SLO ÷ all attempts (errors count in the denominator).",
    ),
    Metric(
        "error_pct", "error %", "%", "lower", "rate",
        "Attempts whose outcome is not ok ÷ all attempts.",
        term="error %",
    ),
)

METRICS: dict[str, Metric] = {m.name: m for m in CATALOGUE}


def _names(*, group: Group | None = None, role: str | None = None) -> tuple[str, ...]:
    return tuple(
        m.name
        for m in CATALOGUE
        if (group is None or m.group == group) and (role is None or getattr(m, role))
    )


REQUEST_LATENCIES: tuple[str, ...] = _names(group="latency")
"""The per-request latencies of every summary table, CDF, headline and comparison."""
SCHEDULE_LATENCIES: tuple[str, ...] = _names(group="from_schedule")
"""Latencies from the scheduled time: shown where the run was open loop."""
SLO_METRICS: tuple[str, ...] = _names(role="slo")
LAYER_METRICS: tuple[str, ...] = _names(role="layer")
RUN_RATES: tuple[str, ...] = tuple(
    m.name for m in CATALOGUE if m.group == "rate" and m.unit.endswith("/s")
)
"""The run rates over the measured window (req/s, tokens/s, goodput)."""
SUMMARISED: tuple[str, ...] = _names(role="summarised")
"""The per-request figures whose distribution summary.json gives per workload."""
NIGHTLY_GATES: tuple[str, ...] = _names(role="gated")
WINDOW_PERCENTILES: tuple[tuple[str, str], ...] = tuple(
    (m.name, stat) for m in CATALOGUE for stat in m.window_stats
)
"""(metric, percentile) drawn per time window, in the charts' and correlation's order."""


def title(name: str) -> str:
    """The metric's display title; an unknown name is shown as it is."""
    metric = METRICS.get(name)
    return metric.title if metric is not None else name


def window_column(name: str, stat: str) -> str:
    """The time-series column of one windowed percentile: `ttft_ms`, `p99` → `ttft_p99_ms`."""
    return f"{METRICS[name].stem}_{stat}_ms"


def window_labels() -> dict[str, str]:
    """Window column → plain words (`ttft_p99_ms` → `p99 TTFT`)."""
    return {window_column(name, stat): f"{stat} {title(name)}" for name, stat in WINDOW_PERCENTILES}


def percentile_fraction(stat: str) -> float:
    """`p99` → 0.99, `p99.9` → 0.999."""
    return float(stat.removeprefix("p")) / 100.0


def needed_n(quantile: float) -> int:
    """The fewest observations a quantile needs to mean anything: at least one beyond
    it (p50: 2, p99: 100, p99.9: 1,000)."""
    return max(2, math.ceil(1.0 / (1.0 - quantile) - 1e-9))
