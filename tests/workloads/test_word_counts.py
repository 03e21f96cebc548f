"""Exact prompt sizes from per-word token counts (workloads/content/word_counts.py)."""

from __future__ import annotations

import numpy as np
import pytest

from zerohop.workloads.content.prompts import PromptBuilder, TokenCalibration, count_regex_tokens
from zerohop.workloads.content.word_counts import WordCounts

pytestmark = pytest.mark.unit

VOCABULARY = 4096


def _counts(spaced: np.ndarray, spaced_stop: np.ndarray, opening: int = 8) -> WordCounts:
    return WordCounts(spaced=spaced, spaced_stop=spaced_stop,
                      opening={i: opening for i in range(0, 160, 10)}, stop_every=12)


def test_one_token_words_reach_every_size_past_the_opening() -> None:
    # the embedded target's rule: a word is a token, a stop one more; whole sentences
    # skip every 13th size, which a sentence ended early reaches
    words = _counts(np.ones(VOCABULARY, int), np.full(VOCABULARY, 2))
    rng = np.random.default_rng(0)
    for target in range(8, 400):
        chosen = words.choose(target, rng)
        assert words.count(*chosen) == target, target
    for target in range(1, 8):  # below the shortest request: the shortest request
        assert words.count(*words.choose(target, rng)) == 8


def test_the_count_is_the_builder_texts_count() -> None:
    # the table's arithmetic (stops by position, a stop at the end) is the text's
    builder = PromptBuilder()
    words = _counts(np.ones(VOCABULARY, int), np.full(VOCABULARY, 2), opening=1)
    rng = np.random.default_rng(3)
    for target in (1, 2, 12, 13, 14, 25, 26, 27, 100, 1000):
        chosen = words.choose(target, rng)
        text = builder.text_of(*chosen)
        assert count_regex_tokens(text) == words.count(*chosen) == target, (target, text)


def test_words_of_many_sizes_meet_every_target_exactly() -> None:
    rng = np.random.default_rng(7)
    spaced = rng.integers(2, 10, size=VOCABULARY)
    words = _counts(spaced, spaced + 1, opening=12)
    targets = rng.integers(12, 5000, size=400).tolist()
    assert all(words.count(*words.choose(t, rng)) == t for t in targets)
    again = np.random.default_rng(11)
    first = words.choose(777, again).indices
    assert np.array_equal(first, words.choose(777, np.random.default_rng(11)).indices)


def test_sizes_no_words_reach_settle_short_by_less_than_a_word() -> None:
    words = _counts(np.full(VOCABULARY, 3), np.full(VOCABULARY, 3), opening=5)
    rng = np.random.default_rng(1)
    for target in (6, 7, 100, 1001):  # reachable: 5 + 3k only
        got = words.count(*words.choose(target, rng))
        assert target - 3 < got <= target, (target, got)


def test_a_size_between_openings_is_never_overshot() -> None:
    # vLLM's chat template with a 320-token vocabulary: most first words are several
    # tokens (openings of 13 and more), a few are one (11); 12 cannot be made, and every
    # later word is at least 2 tokens. The answer is the nearest short of it, 11: a
    # prompt drawn from the first openings tried came out at 13 (CI's vllm tier).
    opening = {i: 13 + i % 3 for i in range(0, 200, 2)} | {201: 11, 203: 11}
    words = WordCounts(spaced=np.full(VOCABULARY, 2), spaced_stop=np.full(VOCABULARY, 3),
                       opening=opening, stop_every=12)
    rng = np.random.default_rng(5)
    assert {words.count(*words.choose(12, rng)) for _ in range(200)} == {11}
    for target in range(11, 60):  # never over the target, and within a word of it
        got = words.count(*words.choose(target, rng))
        assert target - 2 < got <= target, (target, got)
    assert words.count(*words.choose(10, rng)) == 11  # below the smallest: the smallest


def test_the_builder_uses_the_table_only_for_its_own_vocabulary() -> None:
    words = _counts(np.ones(VOCABULARY, int), np.full(VOCABULARY, 2), opening=0 + 1)
    calibration = TokenCalibration(a=5.0, b=0.0, words=words)  # a line far off the rule
    rng = np.random.default_rng(2)
    own = PromptBuilder().build_for_tokens(500, rng, calibration)
    assert count_regex_tokens(own) == 500
    other = PromptBuilder(vocabulary_seed=1).build_for_tokens(500, rng, calibration)
    assert count_regex_tokens(other) < 200  # the line: 100 words
    assert calibration == TokenCalibration(a=5.0, b=0.0)  # the table is not the identity


def test_a_table_without_counts_is_refused() -> None:
    with pytest.raises(ValueError, match="one count per vocabulary word"):
        WordCounts(spaced=np.ones(3, int), spaced_stop=np.ones(4, int), opening={0: 1},
                   stop_every=12)
    with pytest.raises(ValueError, match="at least one token"):
        WordCounts(spaced=np.zeros(3, int), spaced_stop=np.ones(3, int), opening={0: 1},
                   stop_every=12)
    with pytest.raises(ValueError, match="opening"):
        WordCounts(spaced=np.ones(3, int), spaced_stop=np.ones(3, int), opening={5: 1},
                   stop_every=12)
