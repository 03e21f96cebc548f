"""One engine's state as /zerohop/stats reports it (benchmarks and tests read it)."""

from __future__ import annotations

from typing import Any

from zerohop.sim.engine.engine import Engine


def engine_stats(e: Engine) -> dict[str, Any]:
    return {
        "name": e.name,
        "gpu": e.config.gpu,
        "model": e.config.model,
        "tp": e.tp,
        "running": len(e.running),
        "waiting": len(e.waiting),
        "kv_blocks": e.pool.num_blocks,
        "kv_usage": e.kv_usage(),
        "steps": e.stats.steps_total,
        "step_wake_lag": e.wake_lag.summary_ms(),
        "resyncs": e.stats.resyncs_total,
        "preemptions": e.stats.preemptions_total,
        "oom_failures": e.stats.oom_failures_total,
        "rejected": e.stats.rejected_total,
        "generation_tokens": e.stats.generation_tokens_total,
        "prompt_tokens": e.stats.prompt_tokens_total,
        "lora_loads": e.stats.lora_loads_total,
        "prefix_caching": e.prefix_cache is not None,
        "prefix_cache_queries": e.stats.prefix_cache_queries_total,
        "prefix_cache_hits": e.stats.prefix_cache_hits_total,
        "prefix_cached_blocks": e.prefix_cache.resident_blocks if e.prefix_cache else 0,
        "lora_resident": e.lora.resident(),
    }
