"""A real engine's `/tokenize` sizes every prompt exactly: one `zerohop run` of four
workloads (tiny prompts around the smallest request, a flood, long documents, a trace)
against the server, and every ok record checked against the size it asked. Shared by
the vllm tier (tests/vllm/test_vllm_prompt_sizes.py) and the llamacpp tier."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd

from tests.vllm_cpu import SERVED_MODEL_NAME, VllmServer
from zerohop.loadgen.prompt_sizing import probe_tokenize
from zerohop.loadgen.tokenize_words import request_body

WORKLOADS = """
workloads:
  - kind: short_query_flood
    name: tiny
    input_tokens: {{type: uniform, min: 1, max: {tiny_max}}}
    max_tokens: 1
    load: {{kind: closed, users: 2}}
  - kind: short_query_flood
    name: flood
    input_tokens: {{type: uniform, min: 16, max: 64}}
    max_tokens: 1
    load: {{kind: closed, users: 1}}
  - kind: long_context
    name: documents
    document_tokens: {{type: uniform, min: 256, max: 3000}}
    summary_tokens: 1
    load: {{kind: closed, users: 1}}
  - kind: trace_replay
    name: trace
    trace: ${{ZEROHOP_DATA}}/traces/azure_conv_first3600.csv
    format: azure_csv
    speed: 10
    duration_s: 12
    scale_tokens: {{input_multiplier: 0.25, max_input_tokens: 2048, max_output_tokens: 1}}
    load: {{kind: trace, max_in_flight: 16}}
"""
APIS = ("openai-chat", "openai-completions")
CLAMP_WARNING = "records say prompt_clamped=true"


def tokenize_answer(url: str, api: str) -> str:
    """What the server answers one /tokenize request, for a failure's message."""
    body = json.dumps(request_body(api, SERVED_MODEL_NAME, "one two three")).encode()
    request = urllib.request.Request(url + "/tokenize", data=body,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return f"/tokenize answered {response.status}: {response.read()[:300]!r}"
    except (urllib.error.URLError, OSError) as exc:
        return f"/tokenize failed: {exc!r}"


def run_and_check(server: VllmServer, api: str, out: Path) -> None:
    sizing = probe_tokenize(server.url, api, SERVED_MODEL_NAME, api_key=None)
    assert sizing is not None and sizing.calibration.words is not None, \
        tokenize_answer(server.url, api)
    smallest = sizing.calibration.smallest_prompt_tokens()
    print(f"{api}: the smallest request counts {smallest} tokens")
    workloads = out / "workloads.yaml"
    out.mkdir(parents=True)
    # `tiny` asks sizes up to a few past the smallest: some below it, some just above
    workloads.write_text(WORKLOADS.format(tiny_max=smallest + 3))
    done = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", server.url, "--model",
         SERVED_MODEL_NAME, "--api", api, "--workload", str(workloads), "--duration", "12s",
         "--telemetry", "none", "--microbench", "off", "--no-report", "--results-dir",
         str(out / "results")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-3000:]
    [run_dir] = [p for p in (out / "results").iterdir() if p.is_dir()]
    frame = pd.read_parquet(run_dir / "requests.parquet")
    ok = frame[frame.outcome == "ok"]
    assert set(ok.workload) == {"tiny", "flood", "documents", "trace"}, \
        frame.outcome.value_counts()
    assert (ok.prompt_token_source == "tokenize").all(), ok.prompt_token_source.value_counts()
    clamped = ok[ok.prompt_clamped.fillna(False).astype(bool)]
    exact = ok.drop(clamped.index)
    misses = exact[exact.input_tokens != exact.target_input_tokens]
    print(f"{api}: {len(ok)} ok, {len(exact) - len(misses)} exact, {len(clamped)} clamped, "
          f"misses (asked, got): "
          f"{list(zip(misses.target_input_tokens, misses.input_tokens, strict=True))[:20]}")
    assert misses.empty, misses[["workload", "target_input_tokens", "input_tokens"]]
    # below the smallest: sent as the smallest, and marked; at or above it: exact (vLLM's
    # smallest is several tokens on both APIs: a BOS, and the chat template's)
    below = clamped[clamped.target_input_tokens < smallest]
    assert smallest == 1 or len(below) > 0
    assert (below.input_tokens == smallest).all(), below.input_tokens.value_counts()
    assert (exact.target_input_tokens >= smallest).all()
    # a size between two this tokenizer can make: the nearest short of it, and marked
    between = clamped.drop(below.index)
    assert (between.input_tokens < between.target_input_tokens).all(), between
    console = done.stdout + done.stderr
    assert (CLAMP_WARNING in console) == (len(clamped) > 0), console[-3000:]
