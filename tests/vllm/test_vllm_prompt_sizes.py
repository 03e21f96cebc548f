"""README: prompts are sized by the target's own `/tokenize`, word by word, so each
prompt is the asked size exactly on vLLM. Checked here on the tier's vLLM CPU server,
chat and completions, for every ok request: sized by `tokenize`, and `input_tokens`
(vLLM's `usage.prompt_tokens`) equal to `target_input_tokens`, except a size the
tokenizer cannot make: below the smallest request (the chat template or BOS and one
word) it comes out as that smallest request, between two sizes it can make (one token
past the smallest completion, on the tier's tokenizer) as the nearest short of it;
either way marked `prompt_clamped` and said once on the console. Then again on a second
vLLM whose tokenizer is trained here with another vocabulary size, so the words split
into other pieces: a sizing rule that fits one tokenizer by luck fails there."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from tests.vllm_cpu import (
    SERVED_MODEL_NAME,
    VllmServer,
    build_tiny_model,
    probe_env,
    start_vllm,
)
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
SECOND_VOCABULARY = 320  # the tier's own model has 512 tokens
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


@pytest.mark.parametrize("api", APIS)
def test_every_prompt_is_the_asked_size_on_vllm(vllm_server: VllmServer, tmp_path: Path,
                                                api: str) -> None:
    run_and_check(vllm_server, api, tmp_path / api)


def test_every_prompt_is_the_asked_size_with_another_tokenizer(vllm_server: VllmServer,
                                                               tmp_path: Path) -> None:
    probe = probe_env(setup=False)
    assert probe.env is not None  # the session's server runs from it
    model_dir = build_tiny_model(probe.env, tmp_path / f"tiny-vocab{SECOND_VOCABULARY}",
                                 vocab_size=SECOND_VOCABULARY)
    with start_vllm(probe.env, model_dir, cpus=vllm_server.cpus or None,
                    log_path=tmp_path / "vllm-second.log", startup_timeout_s=600) as second:
        print(f"second vLLM up in {second.startup_s:.0f} s")
        for api in APIS:
            run_and_check(second, api, tmp_path / api)
