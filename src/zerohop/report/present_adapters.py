"""The report's "LoRA adapters" section: each adapter's cold first request beside its
warm ones."""

from __future__ import annotations

import math

from zerohop.analysis.latency.lora_adapters import AdapterSummary
from zerohop.report import formatting as fmt


def adapter_rows(adapters: list[AdapterSummary]) -> list[dict[str, str]] | None:
    """One row per adapter; None when the run used none (the section is left out)."""
    if not adapters:
        return None
    return [
        {
            "adapter": a.adapter,
            "workloads": ", ".join(a.workloads),
            "requests": fmt.count(a.requests),
            "errors": fmt.count(a.errors),
            "cold": fmt.ms(a.cold_ttft_ms)
            if a.cold_outcome == "ok"
            else f"failed ({a.cold_outcome})",
            "warm_p50": fmt.ms(a.warm_ttft.percentiles["p50"]),
            "warm_p99": fmt.ms(a.warm_ttft.percentiles["p99"]),
            "ratio": f"{a.cold_over_warm_p50:.2f}×" if math.isfinite(a.cold_over_warm_p50) else "—",
            "warm_e2e_p50": fmt.ms(a.warm_e2e.percentiles["p50"]),
            "warm_n": fmt.count(a.warm_ttft.n),
        }
        for a in adapters
    ]
