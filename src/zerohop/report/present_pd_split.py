"""The report's disaggregated prefill/decode table: each workload's TTFT split into
the parts the decode instance's Server-Timing carried, and the remainder (the router
and the network)."""

from __future__ import annotations

from typing import Any

from zerohop.analysis.server.pd_split import PD_PARTS, REMAINDER, PdSplit
from zerohop.report import formatting as fmt

PART_LABELS: dict[str, str] = {
    "prefill_queue": "prefill queue",
    "prefill": "prefill",
    "kv_transfer": "KV transfer",
    "decode_queue": "decode queue",
    "first_decode": "first decode",
    REMAINDER: "remainder (router, network)",
}


def pd_split_section(split: PdSplit | None) -> dict[str, Any] | None:
    """One row per workload (median and p90 of each part); None without PD answers."""
    if split is None or not split.workloads:
        return None
    names = [*PD_PARTS, REMAINDER]
    return {
        "columns": [PART_LABELS[name] for name in names],
        "rows": [
            {
                "workload": w.workload,
                "n": fmt.count(w.n),
                "ttft_p50": fmt.ms(w.ttft_p50_ms),
                "cells": [f"{fmt.ms(w.p50_ms[name])} / {fmt.ms(w.p90_ms[name])}"
                          for name in names],
            }
            for w in split.workloads
        ],
    }
