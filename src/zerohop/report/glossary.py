"""Definitions of every figure the report shows, in the words of the metric contract.

Request metrics are defined in the metric catalogue (`core.metrics`), telemetry in
`telemetry.canonical.GLOSSARY` (the module that maps server names onto them); this
module adds the report's other terms and puts them in the page's order.
"""

from __future__ import annotations

from zerohop.analysis.client.fidelity import (
    LOADGEN_CPU_LIMIT_PCT,
    LOOP_LAG_P99_LIMIT_MS,
    SCHEDULE_LAG_P99_LIMIT_MS,
)
from zerohop.core.metrics import CATALOGUE
from zerohop.telemetry.canonical import GLOSSARY as TELEMETRY_GLOSSARY

REQUEST_GLOSSARY: dict[str, str] = {m.glossary_term: m.description for m in CATALOGUE}
REQUEST_GLOSSARY |= {
    "tokens_per_read": "Content events per socket read. Events that arrive in one read share "
    "its timestamp, so each extra one adds an ITL gap of exactly 0 ms: batched delivery (by the "
    "server, a proxy, or a late read), not a token that took no time. Where there are such "
    "gaps the report adds \"ITL between reads\", which leaves them out.",
    "prompt_token_source": "How the prompt was sized: tokenize (the target's /tokenize, "
    "chat template included; word by word where its token strings allow: exact), "
    "tokenizer (a local tokenizer.json given with --tokenizer: the text without a chat "
    "template), usage (a line calibrated on its usage.prompt_tokens), estimate (its usage "
    "was unusable: the embedded target's rule), token_ids (exact by construction).",
    "prompt_clamped": "True when the size asked (target_input_tokens) is one the target's "
    "tokenizer cannot make: below the smallest request (its chat template or BOS and one "
    "word), or between two sizes it can make. The nearest was sent, and the run's console "
    "said so once.",
    "percentiles": "p50, p90, p95, p99, p99.9 plus mean/min/max, computed from the exact "
    "records with linear interpolation — never Locust's rounded buckets. Only requests with "
    "outcome ok contribute latency figures; errors are counted separately.",
    "requests": "Attempts recorded for the workload (retries are separate attempts).",
    "measured window": "The one interval every rate of the run is divided by: the load's "
    "duration as the manifest records it (set-up and drain left out), from the run's first "
    "arrival; a request counts towards the rates when it ended inside it. Only a manifest "
    "without that duration falls back to the records' span (first arrival → last end).",
    "SLO met": "An objective key names metric, statistic and unit: ttft_p99_ms=500 is met when "
    "the run's p99 TTFT over ok requests is ≤ 500 ms; the statistic may be any percentile "
    "(p99.9), mean or max, and ttft_ms=500 alone means every request (max).",
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
    "answered by": "Share of the answered logical requests that each model answered (the "
    "workload's own model or a fallback).",
}


def glossary_entries() -> list[tuple[str, str]]:
    """(term, definition) for the page: request metrics and the report's terms, then
    every canonical telemetry metric in name order."""
    return list(REQUEST_GLOSSARY.items()) + sorted(TELEMETRY_GLOSSARY.items())
