"""Prompts of an exact size: generated text, calibration, token ids."""

from __future__ import annotations

import time

import numpy as np
import pytest

from zerohop.sim.answers import tokens as sim_tokens
from zerohop.workloads.content.prompts import (
    PromptBuilder,
    TokenCalibration,
    count_regex_tokens,
    default_calibration,
    token_ids,
)

pytestmark = pytest.mark.unit


def _chat_tokens(text: str) -> int:
    return int(sim_tokens.count_chat_tokens([{"role": "user", "content": text}]))


@pytest.mark.parametrize("target", [8, 16, 33, 100, 512, 2048, 8192, 32768, 131072])
def test_chat_prompts_meet_the_embedded_targets_count(target: int) -> None:
    builder = PromptBuilder()
    calibration = default_calibration("openai-chat", builder)
    rng = np.random.default_rng(target)
    counted = _chat_tokens(builder.build_for_tokens(target, rng, calibration))
    assert abs(counted - target) <= max(1, 0.03 * target), (target, counted)


@pytest.mark.parametrize("target", [10, 300, 5000, 65536])
def test_completion_prompts_meet_the_embedded_targets_count(target: int) -> None:
    builder = PromptBuilder()
    calibration = default_calibration("openai-completions", builder)
    text = builder.build_for_tokens(target, np.random.default_rng(1), calibration)
    counted = sim_tokens.count_prompt_tokens(text)
    assert abs(counted - target) <= max(1, 0.03 * target), (target, counted)


def test_default_calibration_is_measured_not_assumed() -> None:
    chat = default_calibration("openai-chat")
    completions = default_calibration("openai-completions")
    # one word per token plus a full stop every 12 words: 13/12 tokens per word
    assert chat.a == pytest.approx(13 / 12, rel=0.01)
    assert chat.b - completions.b == pytest.approx(7, abs=1e-6)  # the chat template
    assert default_calibration("anthropic") == chat


def test_our_regex_count_agrees_with_the_embedded_target() -> None:
    text = PromptBuilder().build_text(1000, np.random.default_rng(5)) + " Hello, world! x_y 3.5"
    assert count_regex_tokens(text) == sim_tokens.count_text_tokens(text)


def test_calibration_fit_recovers_a_line() -> None:
    fitted = TokenCalibration.fit([(100, 257), (1000, 2507), (5000, 12507)])
    assert fitted.a == pytest.approx(2.5)
    assert fitted.b == pytest.approx(7.0)
    assert fitted.units_for_tokens(2507) == 1000
    assert fitted.units_for_tokens(1) == 1  # never zero words
    assert fitted.block_units(500) == 200


def test_calibration_against_a_coarser_tokenizer() -> None:
    """A tokenizer that splits every pseudo-word into syllable-ish pieces: the fitted line
    still lands prompts within 3 %."""

    def pieces(text: str) -> int:
        return sum(max(1, (len(w) + 2) // 3) for w in text.split()) + text.count(".") + 5

    builder = PromptBuilder()
    rng = np.random.default_rng(3)
    probes = [(n, pieces(builder.build_text(n, rng))) for n in (256, 4096)]
    calibration = TokenCalibration.fit(probes)
    assert calibration.a > 2
    for target in (500, 3000, 20000):
        counted = pieces(builder.build_for_tokens(target, rng, calibration))
        assert abs(counted - target) <= 0.03 * target, (target, counted)


def test_calibration_needs_two_sizes_and_a_positive_slope() -> None:
    with pytest.raises(ValueError, match=">= 2 different sizes"):
        TokenCalibration.fit([(10, 20), (10, 21)])
    with pytest.raises(ValueError, match="slope must be > 0"):
        TokenCalibration(a=0.0, b=1.0)


def test_text_is_reproducible_and_differs_between_requests() -> None:
    builder = PromptBuilder()
    first = builder.build_text(200, np.random.default_rng(1))
    assert first == PromptBuilder().build_text(200, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    a, b = builder.build_text(200, rng), builder.build_text(200, rng)
    assert a.split()[:3] != b.split()[:3]  # no accidental shared prefix
    assert len(first.split()) == 200
    assert first.count(".") == 200 // 12
    assert first.isascii()


def test_vocabulary_is_generated_not_copied() -> None:
    words = PromptBuilder().vocabulary
    assert len(words) == len(set(words)) == 4096
    assert all(w.isalpha() and w.islower() for w in words)
    assert PromptBuilder(seed=5).vocabulary == words  # seed does not change words
    assert PromptBuilder(vocabulary_seed=1).vocabulary != words


def test_a_128k_token_prompt_costs_linear_time() -> None:
    """Building a prompt scales with its length: 32x the tokens cost well under 100x the
    time (a quadratic builder would cost ~1000x). Both sizes are timed in this run, best of
    five, so the check holds on a slow machine as on a fast one; the absolute cost is in
    tests/workloads/bench_workloads.py."""
    builder = PromptBuilder()
    calibration = default_calibration("openai-chat", builder)

    def best_of_five(tokens: int) -> tuple[float, str]:
        timings, text = [], ""
        for seed in range(5):
            rng = np.random.default_rng(seed)
            started = time.perf_counter()
            text = builder.build_for_tokens(tokens, rng, calibration)
            timings.append(time.perf_counter() - started)
        return min(timings), text

    small_s, _ = best_of_five(4096)
    large_s, text = best_of_five(131072)
    assert large_s < 100 * small_s, (large_s, small_s)
    assert abs(_chat_tokens(text) - 131072) < 0.01 * 131072


def test_prefix_blocks_share_prefixes_exactly() -> None:
    builder = PromptBuilder(seed=3)
    a = builder.build_from_blocks([7, 8, 9], block_units=50, n_units=140)
    b = builder.build_from_blocks([7, 8, 10], block_units=50, n_units=150)
    c = builder.build_from_blocks([1, 8, 9], block_units=50, n_units=140)
    words_a, words_b, words_c = a.split(), b.split(), c.split()
    assert words_a[:100] == words_b[:100]
    assert words_a[100:] != words_b[100:140]
    assert words_a[:50] != words_c[:50]
    assert len(words_a) == 140 and len(words_b) == 150
    longer = builder.build_from_blocks([7], block_units=50, n_units=120)
    assert longer.split()[:50] == words_a[:50] and len(longer.split()) == 120
    assert PromptBuilder(seed=4).build_from_blocks([7], 50, 50) != a[: len(a)]


def test_token_ids_are_exact_in_range_and_seeded() -> None:
    ids = token_ids(5000, np.random.default_rng(1), 32000)
    assert len(ids) == 5000
    assert all(isinstance(i, int) for i in ids[:10])
    assert min(ids) >= 1000 and max(ids) < 32000 - 256
    assert ids == token_ids(5000, np.random.default_rng(1), 32000)
    assert token_ids(0, np.random.default_rng(1), 32000) == []
    with pytest.raises(ValueError, match="leaves no ids"):
        token_ids(5, np.random.default_rng(1), 900)
