"""Every API × every default workload kind against the embedded target: all `ok`.

One `zerohop run` per API runs every workload kind together (ShortQueryFlood,
LongContextSummarisation, LoRAMix, TraceReplay, Conversation, SharedPrefix, Agent
where the API takes tools, Embedding and Rerank where the API is an OpenAI-compatible
server's: on Anthropic Messages they are refused in one line, tested below), each from
the same `--workload` file, sized down from the shipped defaults to stay quick on a busy
machine; on an API that takes images a workload sends them too (`images`). The embedded
target has a /tokenize endpoint, so prompts are sized by it: the test also holds the
prompt-size promise there (≥ 99 % of requests within ±1 token of the asked size, its
images' asked tokens included)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from zerohop.core.apis import APIS
from zerohop.workloads.kind_registry import workload_kinds
from zerohop.workloads.schema.pooling_specs import POOLING_APIS

pytestmark = pytest.mark.integration

WORKLOADS = """
workloads:
  - kind: short_query_flood
    name: queries
    input_tokens: {type: uniform, min: 16, max: 64}
    max_tokens: 8
    ignore_eos: true
    load: {kind: open, rate_rps: 4, arrival: poisson}
  - kind: long_context
    name: documents
    document_tokens: {type: uniform, min: 2048, max: 4096}
    summary_tokens: 8
    ignore_eos: true
    load: {kind: closed, users: 1, think_time_s: 0.5}
  - kind: lora_mix
    name: adapters
    adapters: {count: 4, prefix: "lora-"}
    base_model_share: 0.2
    input_tokens: 64
    max_tokens: 8
    ignore_eos: true
    load: {kind: closed, users: 1, think_time_s: 0.2}
  - kind: trace_replay
    name: trace
    trace: ${ZEROHOP_DATA}/traces/azure_conv_first3600.csv
    format: azure_csv
    max_requests: 20
    scale_tokens: {input_multiplier: 0.05, max_input_tokens: 256, max_output_tokens: 8}
    ignore_eos: true
    load: {kind: trace, max_in_flight: 16}
  - kind: conversation
    name: chat
    source: {type: synthetic, turns: 3, user_tokens: {type: uniform, min: 16, max: 48},
             answer_tokens: 8}
    think_time_s: 0.1
    think_time: constant
    ignore_eos: true
    load: {kind: closed, users: 1}
  - kind: shared_prefix
    name: prefixes
    prefixes: {count: 3, tokens: 128}
    question_tokens: 16
    max_tokens: 8
    ignore_eos: true
    load: {kind: closed, users: 1, think_time_s: 0.2}
"""
AGENT = """
  - kind: agent
    name: loops
    tools:
      - {type: function, function: {name: search, parameters: {type: object,
         properties: {query: {type: string}}}}}
    input_tokens: 32
    max_tokens: 16
    max_steps: 3
    tool_latency_ms: 10
    tool_result_tokens: 16
    load: {kind: closed, users: 1}
"""
IMAGES = """
  - kind: short_query_flood
    name: pictures
    input_tokens: {type: uniform, min: 16, max: 48}
    max_tokens: 8
    images: {count: {type: uniform, min: 1, max: 2}, width: {type: uniform, min: 64, max: 256},
             height: 128}
    ignore_eos: true
    load: {kind: closed, users: 1, think_time_s: 0.2}
"""

POOLING = """
  - kind: embedding
    name: vectors
    inputs: {type: uniform, min: 1, max: 4}
    input_tokens: {type: uniform, min: 16, max: 48}
    load: {kind: closed, users: 1, think_time_s: 0.2}
  - kind: rerank
    name: ranks
    documents: {type: uniform, min: 2, max: 5}
    query_tokens: 8
    document_tokens: 32
    top_n: 2
    load: {kind: closed, users: 1, think_time_s: 0.2}
"""


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions", "anthropic",
                                 "openai-responses"])
def test_every_workload_kind_runs_ok_on_every_api(api: str, tmp_path: Path) -> None:
    workloads = tmp_path / "matrix.yaml"
    pooling = api in POOLING_APIS  # an OpenAI-compatible server's /v1/embeddings, /v1/rerank
    workloads.write_text(WORKLOADS + (AGENT if APIS[api].tools else "")
                         + (IMAGES if APIS[api].images else "")
                         + (POOLING if pooling else ""))
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--api", api, "--workload", str(workloads),
         "--duration", "6s", "--telemetry", "none", "--microbench", "off",
         "--results-dir", str(tmp_path / "results"), "--name", api],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    assert "Traceback" not in res.stdout + res.stderr
    (run,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    assert (run / "report.html").is_file()
    frame = pd.read_parquet(run / "requests.parquet")
    assert set(frame["api"]) == {api}
    kinds = {"queries", "documents", "adapters", "trace", "chat", "prefixes"}
    assert set(frame["workload"]) == (kinds | ({"loops"} if APIS[api].tools else set())
                                      | ({"pictures"} if APIS[api].images else set())
                                      | ({"vectors", "ranks"} if pooling else set()))
    assert len(workload_kinds()) == 9  # one workload per kind, every kind
    failed = frame[frame["outcome"] != "ok"]
    assert failed.empty, failed[["workload", "outcome", "error_message"]].head(5).to_dict(
        "records")
    assert set(frame["prompt_token_source"]) == {"tokenize"}
    pictures = frame[frame["workload"] == "pictures"]
    assert (pictures["image_tokens"] > 0).all() and pictures["images"].isin([1, 2]).all()
    # a chat request is never smaller than its template (7 tokens here) and one word
    # (an agent's tools come on top of its prompt, as the server renders them)
    sized = frame[(frame["target_input_tokens"] >= 16) & (frame["workload"] != "loops")]
    # a pooling request's texts are each sized: ±1 token each
    off = (sized["input_tokens"] - sized["target_input_tokens"]
           - sized["image_tokens"].fillna(0)).abs() / sized["items"].fillna(1)
    assert len(sized) > 0 and (off <= 1).mean() >= 0.99, off.describe()


@pytest.mark.parametrize("api", [name for name in APIS if name not in POOLING_APIS])
def test_the_pooling_kinds_are_refused_in_one_line_where_the_api_has_no_endpoint(
        api: str, tmp_path: Path) -> None:
    """Embeddings and rerank are an OpenAI-compatible server's endpoints (the APIs of
    POOLING_APIS run them above); on another API (Anthropic Messages) the run refuses a
    file naming them, in one line, before anything starts."""
    workloads = tmp_path / "pooling.yaml"
    workloads.write_text("workloads:" + POOLING)
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--api", api, "--workload", str(workloads),
         "--duration", "2s", "--telemetry", "none", "--microbench", "off",
         "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode != 0
    assert "Traceback" not in res.stdout + res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if "/v1/embeddings" in ln]
    assert api in line and "openai-chat" in line
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
