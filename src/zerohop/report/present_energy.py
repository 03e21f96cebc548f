"""The report's "Energy" section: what the measured window's output cost the GPUs, in
joules per output token and per request (analysis/server/energy.py)."""

from __future__ import annotations

from typing import Any

from zerohop.analysis.server.energy import EnergySummary
from zerohop.report import formatting as fmt

WELL_COVERED = 0.95  # below: the page says how much of the window the samples span


def energy_section(energy: EnergySummary | None) -> dict[str, Any] | None:
    """The headline figures and one row per GPU; None when no GPU reported energy or
    power (the section is left out)."""
    if energy is None:
        return None
    coverage = (None if energy.coverage >= WELL_COVERED else
                f"The samples span {fmt.pct(100 * energy.coverage)} of the window; the "
                "rest is counted at the measured part's mean power.")
    return {
        "j_per_token": fmt.number(energy.j_per_output_token),
        "j_per_request": fmt.number(energy.j_per_ok_request),
        "tokens_per_j": fmt.number(energy.output_tokens_per_j),
        "mean_power_w": fmt.number(energy.mean_power_w),
        "energy_j": fmt.number(energy.energy_j),
        "window_s": fmt.seconds(energy.window_s),
        "gpus": len(energy.gpus),
        "method": energy.note,
        "modelled": energy.modelled,
        # pooling kinds (embeddings, rerank) have no output tokens: their cost is per item
        "j_per_item": fmt.number(energy.j_per_item) if energy.items > 0 else None,
        "has_tokens": energy.output_tokens > 0,
        "coverage": coverage,
        "rows": [
            {"source": g.source, "gpu": g.gpu, "energy_j": fmt.number(g.energy_j),
             "mean_power_w": fmt.number(g.mean_power_w),
             "covered_s": fmt.seconds(g.covered_s), "resets": fmt.count(g.resets)}
            for g in energy.gpus
        ],
    }
