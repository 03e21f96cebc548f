"""Disaggregated prefill/decode: each request's TTFT split into what the two instances
said they spent.

A decode instance behind a PD router (the embedded target in `--pd-role decode`,
sim/pd_roles.py) answers with `Server-Timing` entries for the prefill side's queue
and prefill, the KV transfer, and its own queue and first step; a `pd;desc=` entry
names the prefill leg's request id. Per request the remainder is the TTFT minus the
parts it has: the router's two hops, the network, HTTP and the write of the prefill's
answer, which no instance saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.server_timing import server_timing_desc, server_timing_entries

PD_PARTS: tuple[str, ...] = ("prefill_queue", "prefill", "kv_transfer", "decode_queue",
                             "first_decode")
REMAINDER = "remainder"
PD_ID_ENTRY = "pd"


def pd_parts_ms(value: str | None) -> dict[str, float] | None:
    """The PD parts a response's Server-Timing carries (ms); None when it has no
    `kv_transfer` entry (not a disaggregated answer)."""
    entries = server_timing_entries(value)
    if "kv_transfer" not in entries:
        return None
    out = {}
    for name in PD_PARTS:
        raw = entries.get(name, {}).get("dur")
        try:
            dur = float(raw) if raw is not None else math.nan
        except ValueError:
            dur = math.nan
        if math.isfinite(dur):
            out[name] = dur
    return out


def pd_request_id(value: str | None) -> str | None:
    """The prefill leg's request id (`pd;desc="..."`), the key of both instances'
    ground truth behind a router that gives both legs one id."""
    return server_timing_desc(value, PD_ID_ENTRY)


def pd_frame(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per ok request whose answer carried the PD parts: its ids (its own where
    the frame has them, and the prefill leg's), TTFT, each part (NaN where not sent)
    and the remainder (TTFT minus the parts sent)."""
    columns = ["request_id", "workload", "prefill_request_id", "ttft_ms", *PD_PARTS,
               REMAINDER]
    if "server_timing" not in requests or requests.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    timing = requests["server_timing"]
    # only the ok answers whose Server-Timing names a KV transfer are parsed: a run
    # without PD routing (every run but a disaggregated one) costs one vectorised pass
    candidate = (requests["outcome"] == "ok").to_numpy() & timing.notna().to_numpy()
    picked = np.flatnonzero(candidate)
    if picked.size:
        texts = timing.iloc[picked]
        picked = picked[texts.astype(str).str.contains("kv_transfer", regex=False).to_numpy()]
    # the analysis reads no request ids (only the columns it needs): None there
    ids = (requests["request_id"].iloc[picked] if "request_id" in requests
           else [None] * picked.size)
    for rid, workload, ttft, timing_text in zip(
        ids, requests["workload"].iloc[picked], requests["ttft_ms"].to_numpy(dtype=float)[picked],
        timing.iloc[picked], strict=True,
    ):
        parts = pd_parts_ms(timing_text if isinstance(timing_text, str) else None)
        if parts is None:
            continue
        ttft = float(ttft)
        rows.append({
            "request_id": rid, "workload": workload, "prefill_request_id":
            pd_request_id(timing_text), "ttft_ms": ttft,
            **{name: parts.get(name, math.nan) for name in PD_PARTS},
            REMAINDER: ttft - sum(parts.values()),
        })
    return pd.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class PdWorkloadSplit:
    workload: str
    n: int
    ttft_p50_ms: float
    p50_ms: dict[str, float]  # part (and "remainder") → its median over the requests
    p90_ms: dict[str, float]


@dataclass(frozen=True)
class PdSplit:
    workloads: list[PdWorkloadSplit]


def pd_split(requests: pd.DataFrame) -> PdSplit | None:
    """Each workload's medians and p90s of the PD parts; None without PD answers."""
    frame = pd_frame(requests)
    if frame.empty:
        return None
    out = []
    for workload, rows in frame.groupby(frame["workload"].astype(str), sort=True):
        names = [*PD_PARTS, REMAINDER]
        out.append(PdWorkloadSplit(
            workload=str(workload), n=len(rows),
            ttft_p50_ms=_quantile(rows["ttft_ms"], 0.5),
            p50_ms={name: _quantile(rows[name], 0.5) for name in names},
            p90_ms={name: _quantile(rows[name], 0.9) for name in names},
        ))
    return PdSplit(out)


def _quantile(values: pd.Series, q: float) -> float:
    data = values.to_numpy(dtype=float)
    data = data[np.isfinite(data)]
    return float(np.quantile(data, q)) if data.size else math.nan
