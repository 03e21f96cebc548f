"""The report's "Speculative decoding" section: how much of the draft the target
accepted (the server's counters) and what the client saw of it, tokens per read
(analysis/latency/spec_decode.py)."""

from __future__ import annotations

import math
from typing import Any

from zerohop.analysis.latency.spec_decode import SpecDecodeSummary
from zerohop.report import formatting as fmt


def spec_decode_section(summary: SpecDecodeSummary | None) -> dict[str, Any] | None:
    """The acceptance figures and the per-position shares; None when the server
    exports no speculative-decoding series (the section is left out)."""
    if summary is None:
        return None
    counted = summary.drafts > 0
    return {
        "source": ("the server's draft and accepted-token counters over the measured window"
                   if counted else "the server's own acceptance gauges, averaged over the "
                   "measured window"),
        "acceptance_rate": fmt.pct(100 * summary.acceptance_rate),
        "accepted_per_draft": fmt.number(summary.accepted_per_draft if counted
                                         else summary.server_accept_length),
        "per_draft_label": ("accepted tokens per draft" if counted
                            else "tokens per verification step (the server's figure)"),
        "drafts": fmt.count(summary.drafts) if counted else None,
        "positions": [{"position": str(i), "share": fmt.pct(100 * share)}
                      for i, share in enumerate(summary.per_position) if math.isfinite(share)],
        "reads_p50": fmt.number(summary.tokens_per_read_p50),
        "reads_p90": fmt.number(summary.tokens_per_read_p90),
        "reads_mean": fmt.number(summary.tokens_per_read_mean),
        "requests": fmt.count(summary.requests),
    }
