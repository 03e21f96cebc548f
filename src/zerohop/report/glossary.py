"""Definitions of every figure the report shows, in the words of the metric contract.

Telemetry definitions come from `zerohop.telemetry.GLOSSARY` when that package is
installed (it owns them); the fallbacks below keep the page complete without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from zerohop.analysis.fidelity import (
    LOADGEN_CPU_LIMIT_PCT,
    LOOP_LAG_P99_LIMIT_MS,
    SCHEDULE_LAG_P99_LIMIT_MS,
)

REQUEST_GLOSSARY: dict[str, str] = {
    "ttft_ms": "Time to first token: actual send → first event that carries generated content "
    "(OpenAI: first non-empty delta.content/reasoning_content/text; Anthropic: first "
    "content_block_delta). Role-only chunks, message_start and ping do not count.",
    "tpot_ms": "Time per output token: (e2e − ttft) ÷ (output_tokens − 1), only where "
    "output_tokens ≥ 2.",
    "itl_ms": "Inter-token latency: gaps between consecutive content events, pooled across all "
    "ok requests for percentiles; tokens_per_event shows multi-token chunks. Comparison "
    "intervals for ITL treat gaps as independent, so they are optimistic.",
    "tokens_per_read": "Content events per socket read. Events that arrive in one read share "
    "its timestamp, so each extra one adds an ITL gap of exactly 0 ms: batched delivery (by the "
    "server, a proxy, or a late read), not a token that took no time. Where there are such "
    "gaps the report adds \"ITL between reads\", which leaves them out.",
    "e2e_ms": "End to end: actual send → stream terminator ([DONE] / message_stop).",
    "schedule_lag_ms": "sent − scheduled, for open-loop runs: how late the client sent.",
    "ttft_from_schedule_ms": "TTFT measured from the scheduled time: the coordinated-omission-"
    "aware figure.",
    "e2e_from_schedule_ms": "E2E measured from the scheduled time (coordinated-omission aware).",
    "input_tokens / output_tokens": "From the server's usage fields when sent, otherwise "
    "counted (token_source says which).",
    "prompt_token_source": "How the prompt was sized: tokenize (the target's /tokenize), "
    "usage (calibrated on its usage.prompt_tokens), estimate (its usage was unusable: the "
    "embedded target's rule), token_ids (exact by construction).",
    "counted_output_tokens": "The client's own count of the answer: content events × tokens "
    "per event, shown beside the server's usage in Token counts.",
    "percentiles": "p50, p90, p95, p99, p99.9 plus mean/min/max, computed from the exact "
    "records with linear interpolation — never Locust's rounded buckets. Only requests with "
    "outcome ok contribute latency figures; errors are counted separately.",
    "requests": "Attempts recorded for the workload (retries are separate attempts).",
    "error %": "Attempts whose outcome is not ok ÷ all attempts.",
    "measured window": "First send (or scheduled start) → last stream end of the workload's "
    "requests; the manifest's duration when records carry no timestamps.",
    "req/s": "ok requests ÷ measured window.",
    "input / output tokens/s": "Input (prompt) and output tokens of ok requests ÷ measured window.",
    "goodput": "Requests meeting every SLO ÷ measured window. A request meets an SLO such as "
    "ttft_p99_ms=500 when its own value is ≤ 500 ms (no TPOT — one token — passes the TPOT "
    "objective; for ITL the request's largest gap must meet it); only ok requests can be good.",
    "good_fraction": "Requests meeting every SLO ÷ all attempts (errors count in the denominator).",
    "SLO met": "An objective key names metric, statistic and unit: ttft_p99_ms=500 is met when "
    "the run's p99 TTFT over ok requests is ≤ 500 ms.",
    "outcome": "ok, connect_error, timeout_ttft, timeout_total, stall, http_<code>, "
    "stream_error:<type>, incomplete_stream, protocol_error, cancelled. A stream without its "
    "terminator is never ok.",
    "offered load": "Requests due to start per second: scheduled_ts in open loop, sent_ts in "
    "closed loop.",
    "achieved load": "ok completions per second, by end time.",
    "window": "The analysis window of the time series and the correlation; a request belongs "
    "to the window of its send time. Charts of long runs merge whole windows to stay under "
    "~2,000 points.",
    "prefill slope": "Theil–Sen fit (median of pairwise slopes) of TTFT on input tokens over "
    "ok requests, in ms per 1,000 input tokens, with its 95 % interval: robust to requests "
    "that queued.",
    "cold / warm (LoRA)": "Cold is the first request sent to an adapter in the run, whatever "
    "its outcome (the one that may pay the adapter load); warm is every later ok request to "
    "it. Reloads after an eviction stay inside warm: the client cannot see them.",
    "client fidelity": f"OK unless the run flagged itself, schedule lag p99 > "
    f"{SCHEDULE_LAG_P99_LIMIT_MS:g} ms, load-generator CPU > {LOADGEN_CPU_LIMIT_PCT:g} % or "
    f"its loop lag p99 > {LOOP_LAG_P99_LIMIT_MS:g} ms.",
    "correlation": "Spearman ρ between a windowed latency percentile and the window mean of "
    "a telemetry series, at the lag in ±N windows with the largest |ρ| (positive lag: "
    "telemetry leads). p-value: t approximation with an effective sample size corrected for "
    "the lag-1 autocorrelation of both series (Bretherton et al. 1999), Bonferroni over the "
    "lags searched; q-value: Benjamini–Hochberg over all pairs. A likely driver has q ≤ the "
    "FDR level and |ρ| ≥ the minimum effect. Correlation is a lead, not proof of cause.",
    "alert": "A rule such as `pcie_rx_bytes_per_s > 2.75e9 for 10s` fires when the condition "
    "holds on consecutive samples spanning at least that long; a hole in the data longer "
    "than three sample intervals ends a streak.",
    "comparison verdict": "worse / better when the bootstrap confidence interval of the "
    "delta excludes 0 and the delta is at least the threshold preset (strict 0 %, default "
    "5 %, lenient 10 %) of the baseline; otherwise within noise. A metric is worse if any "
    "percentile is worse and none better (mixed if both).",
    "bootstrap interval": "Exact bootstrap distribution of each run's sample percentile "
    "(order statistics weighted by binomial probabilities, sampled with a fixed seed), "
    "difference of the two runs' draws, central interval.",
    "layer budget": "For the same workload direct and through an extra layer: layered − "
    "direct per percentile, with its bootstrap interval and share of the layered latency.",
    "GB/s": "10⁹ bytes per second.",
    "logical request": "What the user asked for once, under a client policy: all its attempts "
    "(retries, continuations, fallbacks) share one logical_request_id; the final attempt "
    "carries the logical outcome, latency and answering model.",
    "amplification": "Attempts ÷ logical requests: the load the client policy put on the "
    "server per request the users made (1 = no extra attempts).",
    "logical success rate": "Logical requests whose final outcome is ok ÷ finished logical "
    "requests; compared with a normal-approximation interval on the difference.",
    "logical E2E": "First attempt's send → the final attempt's end, retries and backoff waits "
    "included, over every finished logical request (answered or not).",
    "answered by": "Share of the answered logical requests that each model answered (the "
    "workload's own model or a fallback).",
}

TELEMETRY_FALLBACK: dict[str, str] = {
    "queue_depth": "Requests waiting in the server's queue (gauge, per scrape).",
    "running_requests": "Requests in the running batch (gauge, per scrape).",
    "kv_cache_usage_frac": "Fraction of the KV cache in use, 0–1 (gauge).",
    "server_ttft_p50_s": "Server-side TTFT p50 over the scrape interval, from histogram "
    "bucket deltas (s).",
    "server_ttft_p99_s": "Server-side TTFT p99 over the scrape interval, from histogram "
    "bucket deltas (s).",
    "prompt_tokens_per_s": "Prompt tokens processed per second (counter rate).",
    "generation_tokens_per_s": "Tokens generated per second (counter rate).",
    "preemptions_per_s": "Sequences preempted per second (counter rate).",
    "gpu_sm_util_pct": "NVML GPU utilisation: % of the sample period a kernel was running.",
    "gpu_mem_util_pct": "NVML memory-controller utilisation, %.",
    "gpu_mem_used_bytes": "GPU memory in use, bytes.",
    "gpu_mem_total_bytes": "GPU memory installed, bytes.",
    "gpu_power_w": "Instantaneous board power, W.",
    "gpu_temp_c": "GPU temperature, °C.",
    "gpu_sm_clock_mhz": "SM clock, MHz.",
    "pcie_rx_bytes_per_s": "PCIe bytes received by the GPU per second (NVML counter).",
    "pcie_tx_bytes_per_s": "PCIe bytes sent by the GPU per second (NVML counter).",
    "loadgen_cpu_pct": "Load-generator process CPU, % of one core.",
    "loadgen_rss_bytes": "Load-generator resident memory, bytes.",
    "loadgen_loop_lag_ms": "Load-generator event-loop lag: how late a timer fired, ms.",
    "gap": "A sampler lost its source for a while; the reason is recorded.",
}


def glossary_entries() -> list[tuple[str, str]]:
    """(term, definition) for the page: request metrics, then telemetry."""
    telemetry = dict(TELEMETRY_FALLBACK)
    telemetry.update(_telemetry_glossary())
    return list(REQUEST_GLOSSARY.items()) + sorted(telemetry.items())


def _telemetry_glossary() -> Mapping[str, str]:
    """The telemetry package's own definitions, when it is there."""
    try:
        module = importlib.import_module("zerohop.telemetry")
    except ImportError:
        return {}
    glossary = getattr(module, "GLOSSARY", None)
    if not isinstance(glossary, Mapping):
        return {}
    return {str(k): str(v) for k, v in glossary.items()}
