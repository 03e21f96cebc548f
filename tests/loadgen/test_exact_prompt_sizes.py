"""Prompt sizes, end to end (loadgen/prompt_sizing.py): real `zerohop run`s whose prompts
the server's own `usage.prompt_tokens` counts, against the embedded target (its
/tokenize, chat template included) and against a server without /tokenize sized by
`--tokenizer` (a tokenizer.json built in the test that counts as that server does)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.loadgen.conftest import only_run_dir
from tests.targets.quirky_server import CHAT_OVERHEAD, MODEL, quirky_server
from zerohop.workloads.content.prompts import PromptBuilder

pytestmark = pytest.mark.integration

WORKLOADS = """
workloads:
  - kind: short_query_flood
    name: flood
    input_tokens: {type: uniform, min: 16, max: 200}
    max_tokens: 2
    load: {kind: closed, users: 2}
  - kind: long_context
    name: documents
    document_tokens: {type: uniform, min: 256, max: 2048}
    summary_tokens: 2
    load: {kind: closed, users: 1}
"""


def _run(tmp_path: Path, *args: str) -> pd.DataFrame:
    workloads = tmp_path / "sizes.yaml"
    workloads.write_text(WORKLOADS)
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--workload", str(workloads), "--duration",
         "4s", "--telemetry", "none", "--microbench", "off", "--no-report",
         "--results-dir", str(tmp_path / "results"), *args],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    frame = pd.read_parquet(only_run_dir(tmp_path / "results") / "requests.parquet")
    ok = frame[frame["outcome"] == "ok"]
    assert len(ok) >= 20 and set(ok["workload"]) == {"flood", "documents"}
    return ok


def test_chat_prompts_land_on_the_asked_size_by_the_servers_usage(tmp_path: Path) -> None:
    ok = _run(tmp_path, "--api", "openai-chat")
    assert set(ok["prompt_token_source"]) == {"tokenize"}
    error = ok["input_tokens"] - ok["target_input_tokens"]  # the template's tokens count
    assert error.abs().max() <= 1, error.value_counts().to_dict()
    assert (error == 0).mean() >= 0.99, error.value_counts().to_dict()


def _word_level_tokenizer(path: Path) -> Path:
    """A tokenizer.json that counts what the quirky server counts: a token per word and
    per stop (its `\\w+|[^\\w\\s]` rule), no special tokens, no chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, ".": 1}
    for word in PromptBuilder().vocabulary:
        vocab[word] = len(vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


@pytest.mark.parametrize("api, template", [
    ("openai-completions", 0),
    ("openai-chat", CHAT_OVERHEAD),  # a tokenizer.json has no chat template: on top
])
def test_a_local_tokenizer_sizes_prompts_on_a_target_without_tokenize(
        tmp_path: Path, api: str, template: int) -> None:
    tokenizer = _word_level_tokenizer(tmp_path / "tokenizer.json")
    with quirky_server("normal") as url:  # usage counts, but no /tokenize
        ok = _run(tmp_path, "--host", url, "--model", MODEL, "--api", api,
                  "--tokenizer", str(tokenizer))
    assert set(ok["prompt_token_source"]) == {"tokenizer"}  # not the usage calibration
    error = ok["input_tokens"] - ok["target_input_tokens"]
    assert set(error) == {template}, error.value_counts().to_dict()
