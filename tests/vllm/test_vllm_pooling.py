"""Embeddings and rerank against a real vLLM CPU server: the tier's tiny Llama served as
a pooling model (`--runner pooling --convert embed`), which answers /v1/embeddings and
/v1/rerank. One `zerohop run` with both kinds: every request ok, its items and the
server's input tokens in the record, no streaming latencies, items/s in summary.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.vllm_cpu import VllmServer, build_tiny_model, default_model_dir, probe_env, start_vllm

WORKLOADS = """
workloads:
  - kind: embedding
    name: vectors
    inputs: {type: uniform, min: 1, max: 8}
    input_tokens: {type: uniform, min: 16, max: 128}
    load: {kind: closed, users: 2}
  - kind: rerank
    name: ranks
    documents: {type: uniform, min: 2, max: 8}
    query_tokens: {type: uniform, min: 8, max: 16}
    document_tokens: {type: uniform, min: 16, max: 64}
    top_n: 2
    load: {kind: closed, users: 2}
"""


def test_embeddings_and_rerank_on_real_vllm(vllm_server: VllmServer, tmp_path: Path) -> None:
    probe = probe_env(setup=False)
    assert probe.env is not None  # the session's server runs from it
    model_dir = build_tiny_model(probe.env, default_model_dir())
    with start_vllm(probe.env, model_dir, cpus=vllm_server.cpus or None,
                    extra_args=["--runner", "pooling", "--convert", "embed"],
                    log_path=tmp_path / "vllm-pooling.log", startup_timeout_s=600) as pooling:
        print(f"pooling vLLM up in {pooling.startup_s:.0f} s")
        workloads = tmp_path / "pooling.yaml"
        workloads.write_text(WORKLOADS)
        res = subprocess.run(
            [sys.executable, "-m", "zerohop", "run", "--host", pooling.url, "--model", "tiny",
             "--workload", str(workloads), "--duration", "15s", "--telemetry", "none",
             "--microbench", "off", "--results-dir", str(tmp_path / "results")],
            capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    run = next((tmp_path / "results").iterdir())
    df = pd.read_parquet(run / "requests.parquet")
    assert (df.outcome == "ok").all(), df[["workload", "outcome", "error_message"]].head()
    counts = df.workload.value_counts()
    assert set(counts.index) == {"vectors", "ranks"} and counts.min() >= 5, counts
    vectors, ranks = df[df.workload == "vectors"], df[df.workload == "ranks"]
    assert vectors["items"].between(1, 8).all() and ranks["items"].between(2, 8).all()
    assert (df.input_tokens > 0).all()  # the server's usage
    assert df.ttft_ms.isna().all() and df.tpot_ms.isna().all()
    per_item = (df.input_tokens - df.target_input_tokens) / df["items"]
    # each text is sized through the chat calibration; vLLM adds its BOS to a bare text,
    # one token the calibration does not see: never short, at most that token over (a
    # rerank on an embedding model reads the query once, not beside each document, so
    # its served size is under the cross-encoder's asked one: printed, not held)
    assert per_item[df.workload == "vectors"].between(0, 1).all(), per_item.describe()
    rates = json.loads((run / "summary.json").read_text())["total"]["rates"]
    assert rates["items_per_s"] > rates["req_per_s"] > 0
    print(f"vLLM CPU pooling: {rates['items_per_s']:.1f} items/s, "
          f"{rates['input_tokens_per_s']:.0f} input tok/s; E2E p50 "
          f"{vectors.e2e_ms.median():.1f} ms (embeddings, n={len(vectors)}), "
          f"{ranks.e2e_ms.median():.1f} ms (rerank, n={len(ranks)}); served − asked input "
          f"tokens per item: "
          f"{df.assign(off=per_item).groupby('workload').off.describe().round(2).to_dict('index')}")
