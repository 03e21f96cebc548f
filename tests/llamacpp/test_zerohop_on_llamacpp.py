"""`zerohop run` against a real llama-server, told nothing about which engine it is: the
default workloads and conversations on the chat and completions APIs with every record
ok (or cut short in flight when the run's time was up), token counts from usage, every
prompt the asked size through llama.cpp's own /tokenize, its /metrics read as canonical
series, and its over-context error recorded with llama.cpp's own error type."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.exact_prompt_sizes import APIS, run_and_check
from tests.llamacpp_server import (
    SERVED_MODEL_NAME,
    LlamaServer,
    build_tiny_gguf,
    probe_server,
    start_llama_server,
)

CONVERSATIONS = Path(__file__).resolve().parents[2] / "workloads" / "conversation.yaml"
SECOND_VOCABULARY = 320  # the tier's own model has 512 tokens
OVER_CONTEXT = """
kind: long_context
name: over_context
document_tokens: {type: uniform, min: 17000, max: 18000}
summary_tokens: 4
load: {kind: closed, users: 1, think_time_s: 0.2}
"""


def zerohop_run(server: LlamaServer, out: Path, *args: str, exit_code: int = 0
                ) -> tuple[Path, str]:
    """Run zerohop against the server; (the run's folder, its console)."""
    done = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", server.url, "--model",
         SERVED_MODEL_NAME, "--microbench", "off", "--results-dir", str(out), *args],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == exit_code, done.stdout[-2000:] + done.stderr[-3000:]
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    return run_dir, done.stdout + done.stderr


@pytest.mark.parametrize("api", APIS)
def test_every_prompt_is_the_asked_size_on_llamacpp(llama_server: LlamaServer,
                                                    tmp_path: Path, api: str) -> None:
    run_and_check(llama_server, api, tmp_path / api)


@pytest.mark.parametrize("api", APIS)
def test_the_default_workloads_run_clean_on_llamacpp(llama_server: LlamaServer,
                                                     tmp_path: Path, api: str) -> None:
    run_dir, console = zerohop_run(llama_server, tmp_path, "--api", api, "--duration", "15s",
                                   "--telemetry", "prom,loadgen", "--name", "llamacpp")
    # the LoRA mix needs adapters, which this server has none of: left out, said once
    assert "LoRAMix left out" in console
    frame = pd.read_parquet(run_dir / "requests.parquet")
    assert set(frame.workload) == {"short_query_flood", "long_context",
                                   "trace_replay_azure_conv"}
    # no errors: each request ended ok, or in flight when the run's time was up
    assert set(frame.outcome) <= {"ok", "cancelled"}, \
        frame.groupby(["workload", "outcome"]).size()
    frame = frame[frame.outcome == "ok"]
    assert set(frame.workload) == {"short_query_flood", "long_context",
                                   "trace_replay_azure_conv"}
    assert (frame.token_source == "usage").all()
    assert (frame.output_tokens == frame.max_tokens).all()  # ignore_eos honoured
    assert (frame.prompt_token_source == "tokenize").all()
    exact = frame[~frame.prompt_clamped.fillna(False).astype(bool)]
    assert (exact.input_tokens == exact.target_input_tokens).all()
    assert (frame.content_events == frame.output_tokens).all()  # a token an event

    telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
    from_server = telemetry[telemetry.source.str.startswith("prom")]
    for metric in ("queue_depth", "running_requests", "prompt_tokens_per_s",
                   "generation_tokens_per_s"):
        assert (from_server.metric == metric).any(), sorted(set(from_server.metric))
    assert from_server[from_server.metric == "running_requests"].value.max() >= 1
    assert (run_dir / "report.html").is_file()


def test_conversations_run_clean_on_llamacpp(llama_server: LlamaServer,
                                             tmp_path: Path) -> None:
    run_dir, console = zerohop_run(llama_server, tmp_path, "--api", "openai-chat",
                                   "--workload", str(CONVERSATIONS), "--duration", "20s",
                                   "--telemetry", "none", "--no-report", "--answer-probe")
    frame = pd.read_parquet(run_dir / "requests.parquet")
    assert set(frame.outcome) <= {"ok", "cancelled"}, frame.outcome.value_counts()
    frame = frame[frame.outcome == "ok"]
    assert (frame.output_tokens == frame.max_tokens).all()
    later = frame[frame.turn > 1]
    assert len(later) >= 4, frame.turn.value_counts()
    # each later turn resends the history, which llama.cpp finds in a slot's cache
    assert (later.cached_tokens > 0).mean() > 0.5, later.cached_tokens.describe()
    assert (later.cached_tokens < later.input_tokens).all()

    # the answer probe beside the same run, its prompts batched with the conversations in
    # the server's 4 slots (docs/answers-under-load.md): whatever share changed is the
    # finding; the probe itself must have compared its answers
    answers = json.loads((run_dir / "summary.json").read_text())["answers"]
    line = next((x for x in console.splitlines() if x.startswith("answers under load:")),
                console[-1000:])
    assert answers is not None and not answers["modelled"], line
    assert answers["failed_alone"] == 0 and answers["failed_load"] == 0, line
    assert answers["compared"] >= 8, (answers["not_under_load"], line)
    assert set(answers["units"]) <= {"token id", "token"}, line  # llama.cpp's logprobs
    assert answers["max_logprob_change"] is not None, line


def test_an_over_context_request_is_recorded_with_llamacpps_error(
        llama_server: LlamaServer, tmp_path: Path) -> None:
    workload = tmp_path / "over.yaml"
    workload.write_text(OVER_CONTEXT)
    run_dir, console = zerohop_run(llama_server, tmp_path / "run", "--api",
                                   "openai-completions", "--workload", str(workload),
                                   "--duration", "5s", "--telemetry", "none", "--no-report",
                                   exit_code=4)  # no request succeeded
    assert "as http_400: request (" in console  # the server's own words, once
    frame = pd.read_parquet(run_dir / "requests.parquet")
    assert len(frame) >= 1 and (frame.outcome == "http_400").all(), frame.outcome
    assert (frame.error_type == "exceed_context_size_error").all()
    assert frame.error_message.str.contains("exceeds the available context size").all()


def test_every_prompt_is_the_asked_size_with_another_vocabulary(
        llama_server: LlamaServer, tmp_path: Path) -> None:
    """A second server whose vocabulary is trained with another size splits the words
    into other pieces: a sizing rule that fits one tokenizer by luck fails there."""
    model = build_tiny_gguf(tmp_path / f"tiny-vocab{SECOND_VOCABULARY}.gguf",
                            vocab_size=SECOND_VOCABULARY)
    probe = probe_server(build=False)
    with start_llama_server(probe.binary, model, cpus=llama_server.cpus,
                            log_path=tmp_path / "second.log") as second:
        for api in APIS:
            run_and_check(second, api, tmp_path / api)
