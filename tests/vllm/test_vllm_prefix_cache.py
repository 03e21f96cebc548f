"""Conversations on a real vLLM CPU server with its prefix cache on (the `vllm` tier):
later turns resend their history and vLLM answers it from the cache. What must hold:
later turns report `cached_tokens > 0` in their usage, their TTFT is lower than that of
first turns of the same prompt length, and the hit rate zerohop computes from usage
agrees with vLLM's own `/metrics` prefix-cache counters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from zerohop.analysis.run_analysis import analyse_run
from zerohop.storage.run_reader import load_run
from zerohop.testing.vllm_cpu import VllmServer

WORKLOAD = Path(__file__).with_name("conversation.yaml")
LENGTH_BIN_TOKENS = 256  # first and later turns are compared within bins of this width


def test_conversation_hits_vllm_prefix_cache(vllm_server: VllmServer, tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", vllm_server.url, "--model", "tiny",
         "--workload", str(WORKLOAD), "--duration", "30s", "--telemetry", "prom",
         "--results-dir", str(tmp_path), "--name", "conv"],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    df = pd.read_parquet(run_dir / "requests.parquet")
    ok = df[df.outcome == "ok"]
    assert len(ok) >= 20 and len(ok) >= 0.95 * len(df), df.outcome.value_counts()
    first, later = ok[ok.turn == 1], ok[ok.turn > 1]
    assert len(later) >= 10, ok.turn.value_counts()

    # usage says what the cache served: later turns' history, never a first turn's prompt
    assert (later.cached_tokens > 0).mean() > 0.9, later.cached_tokens.describe()
    assert (later.cached_tokens < later.input_tokens).all()

    ratios = same_length_ttft_ratios(first, later)
    print(f"later/first turn TTFT p50 per {LENGTH_BIN_TOKENS}-token bin: "
          f"{[round(r, 2) for r in ratios]}")
    assert len(ratios) >= 2, "first and later turns share too few prompt lengths"
    assert float(np.median(ratios)) < 1.0, ratios

    cache = analyse_run(load_run(run_dir)).sessions.cache  # type: ignore[union-attr]
    assert cache is not None
    print(f"prefix-cache hit rate: {cache.hit_rate:.3f} from usage, "
          f"{cache.server_hit_rate:.3f} from vLLM's /metrics")
    assert cache.hit_rate > 0.2
    assert abs(cache.hit_rate / cache.server_hit_rate - 1) <= 0.05, (
        cache.hit_rate, cache.server_hit_rate)


def same_length_ttft_ratios(first: pd.DataFrame, later: pd.DataFrame) -> list[float]:
    """Later turns' median TTFT over first turns' of the same prompt length, one ratio per
    length bin that holds at least three of each."""
    ratios = []
    first_bins = first.input_tokens // LENGTH_BIN_TOKENS
    later_bins = later.input_tokens // LENGTH_BIN_TOKENS
    for b in sorted(set(first_bins) & set(later_bins)):
        a, c = first.ttft_ms[first_bins == b], later.ttft_ms[later_bins == b]
        if len(a) >= 3 and len(c) >= 3:
            ratios.append(float(c.median() / a.median()))
    return ratios
