"""The sim's tokenizer and output-length rules (documented in zerohop.sim.answers.tokens)."""

from __future__ import annotations

import pytest

from zerohop.sim.answers.tokens import (
    CHAT_MESSAGE_OVERHEAD,
    CHAT_REQUEST_OVERHEAD,
    count_chat_tokens,
    count_prompt_tokens,
    count_text_tokens,
    draw_output_tokens,
    generated_text,
)

pytestmark = pytest.mark.unit


def test_text_tokens_follow_the_regex_rule() -> None:
    assert count_text_tokens("Hello, world!") == 4
    assert count_text_tokens("  ") == 0
    assert count_text_tokens("a_b c-d") == 4  # a_b, c, -, d


def test_prompt_forms() -> None:
    assert count_prompt_tokens("one two") == 2
    assert count_prompt_tokens([5, 6, 7]) == 3
    assert count_prompt_tokens([[1, 2, 3, 4]]) == 4
    assert count_prompt_tokens(["x y z"]) == 3
    with pytest.raises(ValueError):
        count_prompt_tokens(3.5)


def test_chat_template_overhead() -> None:
    messages = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "ok"}]
    expected = CHAT_REQUEST_OVERHEAD + 2 * CHAT_MESSAGE_OVERHEAD + 3
    assert count_chat_tokens(messages) == expected
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi there"}]}]
    assert count_chat_tokens(parts) == CHAT_REQUEST_OVERHEAD + CHAT_MESSAGE_OVERHEAD + 2
    with_system = count_chat_tokens(parts, system="be brief")
    assert with_system == count_chat_tokens(parts) + CHAT_MESSAGE_OVERHEAD + 2


def test_ignore_eos_gives_exactly_max_tokens() -> None:
    n = draw_output_tokens(
        max_tokens=37,
        ignore_eos=True,
        min_tokens=0,
        seed=1,
        request_id="r",
        eos_median_tokens=5,
        eos_sigma=1.0,
    )
    assert n == 37


def test_output_length_is_seeded_capped_and_floored() -> None:
    def draw(i: int) -> int:
        return draw_output_tokens(
            max_tokens=64,
            ignore_eos=False,
            min_tokens=3,
            seed=7,
            request_id=f"r{i}",
            eos_median_tokens=50.0,
            eos_sigma=0.8,
        )

    draws = [draw(i) for i in range(300)]
    again = [draw(i) for i in range(300)]
    assert draws == again
    assert all(3 <= d <= 64 for d in draws)
    assert 64 in draws and len(set(draws)) > 20  # capped often, but varied
    median = sorted(draws)[150]
    assert 35 <= median <= 64


def test_generated_text_retokenises_to_its_length() -> None:
    for offset in (0, 5, 90):
        assert count_text_tokens(generated_text(offset, 25)) == 25
