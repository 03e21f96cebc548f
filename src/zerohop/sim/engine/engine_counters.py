"""The counters and latency histograms one engine keeps (its Prometheus metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field

from zerohop.sim.engine.histograms import (
    ITL_BUCKETS_S,
    REQUEST_LATENCY_BUCKETS_S,
    TTFT_BUCKETS_S,
    BucketHistogram,
)


@dataclass
class EngineCounters:
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    preemptions_total: int = 0
    steps_total: int = 0
    resyncs_total: int = 0
    lora_loads_total: int = 0
    success_total: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0})
    aborted_total: int = 0
    rejected_total: int = 0
    oom_failures_total: int = 0
    prefix_cache_queries_total: int = 0  # prompt tokens looked up (first scheduling only)
    prefix_cache_hits_total: int = 0  # of those, tokens found cached
    ttft: BucketHistogram = field(default_factory=lambda: BucketHistogram(TTFT_BUCKETS_S))
    itl: BucketHistogram = field(default_factory=lambda: BucketHistogram(ITL_BUCKETS_S))
    e2e: BucketHistogram = field(default_factory=lambda: BucketHistogram(REQUEST_LATENCY_BUCKETS_S))
    # observed when a request finishes, as vLLM's v1 engine does: queue (arrival → first
    # scheduled), prefill (first scheduled → token 1), decode (token 1 → last token)
    queue_time: BucketHistogram = field(
        default_factory=lambda: BucketHistogram(REQUEST_LATENCY_BUCKETS_S)
    )
    prefill_time: BucketHistogram = field(
        default_factory=lambda: BucketHistogram(REQUEST_LATENCY_BUCKETS_S)
    )
    decode_time: BucketHistogram = field(
        default_factory=lambda: BucketHistogram(REQUEST_LATENCY_BUCKETS_S)
    )
