"""`zerohop run --api openai-responses` against a real vLLM CPU server (it serves
/v1/responses): one run whose two workloads are the same short queries, one on the
Responses API and one on chat, so that their TTFTs come from one interleaved run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.vllm_cpu import VllmServer

WORKLOADS = """
workloads:
  - kind: short_query_flood
    name: responses
    api: openai-responses
    input_tokens: {type: uniform, min: 16, max: 64}
    max_tokens: 16
    load: {kind: closed, users: 2}
  - kind: short_query_flood
    name: chat
    api: openai-chat
    input_tokens: {type: uniform, min: 16, max: 64}
    max_tokens: 16
    load: {kind: closed, users: 2}
"""


def test_responses_and_chat_interleaved_on_real_vllm(vllm_server: VllmServer,
                                                     tmp_path: Path) -> None:
    workloads = tmp_path / "responses.yaml"
    workloads.write_text(WORKLOADS)
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", vllm_server.url, "--model", "tiny",
         "--api", "openai-responses", "--workload", str(workloads), "--duration", "25s",
         "--users", "4", "--telemetry", "none", "--microbench", "off",
         "--results-dir", str(tmp_path), "--name", "responses"],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    run = next(p for p in tmp_path.iterdir() if p.is_dir())
    df = pd.read_parquet(run / "requests.parquet")
    assert set(df.workload) == {"responses", "chat"}
    assert not df.outcome.str.startswith("protocol_error").any(), df.error_message.dropna()[:3]
    assert (df.outcome == "ok").mean() > 0.95, df.outcome.value_counts()
    ok = df[df.outcome == "ok"]
    responses = ok[ok.workload == "responses"]
    assert set(responses.api) == {"openai-responses"} and len(responses) >= 10
    assert (responses.token_source == "usage").all()  # usage from response.completed
    assert (responses.output_tokens == responses.max_tokens).mean() > 0.9  # ignore_eos honoured
    assert responses.ttft_ms.notna().all() and (responses.content_events >= 1).all()
    assert (responses.input_tokens > 0).all()
    medians = ok.groupby("workload").ttft_ms.median()
    print(f"vLLM CPU TTFT p50 ms: responses {medians['responses']:.1f}, "
          f"chat {medians['chat']:.1f} (n={len(responses)}, {len(ok) - len(responses)})")
