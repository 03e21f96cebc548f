"""How prompts are sized (loadgen/prompt_sizing.py, loadgen/tokenize_words.py): the order
of the methods, the whole request counted through /tokenize's messages form, the word
table read from its token strings, and `--tokenizer`. The target's /tokenize is the
embedded target's own handler, called in process: no socket."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.workloads.tiny_tokenizer import write_tiny_tokenizer
from zerohop.loadgen import tokenize_words
from zerohop.loadgen.prompt_sizing import (
    SIZED_BY_TOKENIZE,
    SIZED_BY_TOKENIZER,
    SIZED_BY_USAGE,
    PromptSizing,
    choose_sizing,
    probe_tokenize,
    sizing_from_tokenizer,
)
from zerohop.loadgen.tokenize_words import request_body, word_runs
from zerohop.sim.answers.tokenize import tokenize_response
from zerohop.sim.answers.tokens import count_chat_tokens, count_prompt_tokens
from zerohop.workloads.content.local_tokenizer import load_local_tokenizer
from zerohop.workloads.content.prompts import PromptBuilder, TokenCalibration

pytestmark = pytest.mark.unit

MODEL = "m"
TARGETS = (16, 23, 64, 65, 100, 255, 777, 2048, 4000)


class FakeTarget:
    """The embedded target's /tokenize handler behind `tokenize_words.tokenize`."""

    def __init__(self, *, token_strs: bool = True) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.token_strs = token_strs
        self.engine = SimpleNamespace(max_model_len=32_768)

    def __call__(self, base_url: str, body: dict[str, Any], api_key: str | None
                 ) -> dict[str, Any] | None:
        self.bodies.append(body)
        status, raw = tokenize_response(json.dumps(body).encode(),
                                        {MODEL: (self.engine, None)}, self.engine)
        answer: dict[str, Any] = json.loads(raw)
        if not self.token_strs:
            answer.pop("token_strs", None)
        return answer if status == 200 else None


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> FakeTarget:
    fake = FakeTarget()
    monkeypatch.setattr(tokenize_words, "tokenize", fake)
    return fake


def test_the_methods_in_order_tokenize_then_the_tokenizer_then_usage(tmp_path: Path) -> None:
    tokenizer = load_local_tokenizer(write_tiny_tokenizer(tmp_path))
    line = PromptSizing(TokenCalibration(a=1.0, b=0.0), SIZED_BY_TOKENIZE)
    asked: list[str] = []

    def tokenize(answer: PromptSizing | None) -> Any:
        return lambda: asked.append("tokenize") or answer

    def usage() -> PromptSizing:
        asked.append("usage")
        return PromptSizing(TokenCalibration(a=1.5, b=3.0), SIZED_BY_USAGE)

    assert choose_sizing(tokenize(line), tokenizer, usage) is line
    assert asked == ["tokenize"]  # the target's own count wins over a local file
    assert choose_sizing(tokenize(None), tokenizer, usage).source == SIZED_BY_TOKENIZER
    assert asked == ["tokenize", "tokenize"]  # the tokenizer wins over usage
    assert choose_sizing(tokenize(None), None, usage).source == SIZED_BY_USAGE
    assert asked == ["tokenize", "tokenize", "tokenize", "usage"]


@pytest.mark.parametrize("api, count", [
    ("openai-chat", lambda text: count_chat_tokens([{"role": "user", "content": text}])),
    ("anthropic", lambda text: count_chat_tokens([{"role": "user", "content": text}])),
    ("openai-completions", count_prompt_tokens),
])
def test_prompts_count_exactly_what_the_server_counts_for_the_request(
        target: FakeTarget, api: str, count: Any) -> None:
    sizing = probe_tokenize("http://target", api, MODEL, api_key=None)
    assert sizing is not None and sizing.source == SIZED_BY_TOKENIZE
    assert sizing.calibration.words is not None
    counted = [b for b in target.bodies if not b.get("return_token_strs")]
    chat = api != "openai-completions"
    assert all(("messages" in b) == chat and ("prompt" in b) != chat for b in counted)
    assert all(b["add_generation_prompt"] for b in counted if chat)
    builder, rng = PromptBuilder(), np.random.default_rng(4)
    # the server's usage rule, template included: every size exact
    assert [count(builder.build_for_tokens(t, rng, sizing.calibration)) for t in TARGETS] \
        == list(TARGETS)


def test_without_token_strings_prompts_follow_the_fitted_line(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(tokenize_words, "tokenize", FakeTarget(token_strs=False))
    with caplog.at_level(logging.INFO, logger="zerohop"):
        sizing = probe_tokenize("http://target", "openai-chat", MODEL, api_key=None)
    assert sizing is not None and sizing.source == SIZED_BY_TOKENIZE
    assert sizing.calibration.words is None
    assert sizing.calibration.a == pytest.approx(13 / 12, rel=0.01)
    assert any("gave no token strings" in r.getMessage() for r in caplog.records)


def test_the_request_body_is_the_messages_form_for_chat_apis() -> None:
    assert request_body("openai-chat", MODEL, "hi") == {
        "model": MODEL, "messages": [{"role": "user", "content": "hi"}],
        "add_generation_prompt": True}
    assert request_body("openai-completions", MODEL, "hi") == {"model": MODEL, "prompt": "hi"}


@pytest.mark.parametrize("strings, runs", [
    (["Ġb", "r", "at", "ou", ".", "Ġke", "l", "o"], [5, 3]),  # byte-level BPE
    (["<s>", "▁▁", "bra", "▁ke", "lo", "."], [2, 3]),  # SentencePiece, a BOS first
    ([" bra", " kelo", "."], [1, 2]),  # the embedded target
    (["bra", "kelo"], []),  # no space mark: no runs
])
def test_words_are_the_runs_that_start_at_a_space_mark(strings: list[str],
                                                       runs: list[int]) -> None:
    assert word_runs(strings) == runs


def test_a_local_tokenizer_sizes_prompts_exactly(tmp_path: Path) -> None:
    tokenizer = load_local_tokenizer(write_tiny_tokenizer(tmp_path))
    sizing = sizing_from_tokenizer(tokenizer)
    assert sizing.source == SIZED_BY_TOKENIZER and sizing.calibration.words is not None
    builder, rng = PromptBuilder(), np.random.default_rng(8)
    assert [tokenizer.count(builder.build_for_tokens(t, rng, sizing.calibration))
            for t in TARGETS] == list(TARGETS)
    # the fitted line alone: a word is 3 to 9 tokens here, so most sizes miss
    line = TokenCalibration(a=sizing.calibration.a, b=sizing.calibration.b)
    exact = np.mean([tokenizer.count(builder.build_for_tokens(t, rng, line)) == t
                     for t in range(64, 264)])
    assert exact < 0.5


def test_a_local_tokenizer_that_is_not_additive_warns_and_fits_a_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tokenizer = load_local_tokenizer(write_tiny_tokenizer(tmp_path, split_at_spaces=False))
    with caplog.at_level(logging.WARNING, logger="zerohop"):
        sizing = sizing_from_tokenizer(tokenizer)
    assert sizing.source == SIZED_BY_TOKENIZER and sizing.calibration.words is None
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("zerohop: warning: prompt sizing:") and "\n" not in warning
