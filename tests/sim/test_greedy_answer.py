"""The embedded target's greedy answers and its modelled divergence (sim/answers/greedy_answer.py),
read back through the client's parser (client/answer_tokens.py)."""

from __future__ import annotations

import json

import pytest

from zerohop.client.answer_tokens import read_answer
from zerohop.sim.answers.api_shapes import ChatShape, CompletionShape
from zerohop.sim.answers.greedy_answer import LOGPROB_DRIFT, greedy_answer

pytestmark = pytest.mark.unit


def chat(content: str, **fields: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": content}], "temperature": 0, "seed": 7,
            "logprobs": True, **fields}


def test_only_seeded_temperature_zero_chat_and_completions_are_greedy() -> None:
    assert greedy_answer("chat", chat("hi")) is not None
    assert greedy_answer("completions", {"prompt": "hi", "temperature": 0.0, "seed": 1})
    assert greedy_answer("chat", chat("hi", temperature=0.7)) is None
    assert greedy_answer("chat", {"messages": [], "temperature": 0}) is None  # no seed
    assert greedy_answer("chat", chat("hi", seed=True)) is None
    assert greedy_answer("messages", chat("hi")) is None


def test_the_same_prompt_and_seed_give_the_same_words() -> None:
    one, two = greedy_answer("chat", chat("hi")), greedy_answer("chat", chat("hi"))
    other = greedy_answer("chat", chat("hi", seed=8))
    assert one is not None and two is not None and other is not None
    assert one.text(12) == two.text(12) and one.text(12) != other.text(12)


def test_the_planted_share_flips_one_token_and_the_words_after_it() -> None:
    answers = [greedy_answer("chat", chat(f"prompt {i}")) for i in range(2000)]
    flipped = [a.diverged(20, share=0.2, sim_seed=3) for a in answers if a is not None]
    changed = [(a, f) for a, f in zip(answers, flipped, strict=True) if f.flip_at is not None]
    assert abs(len(changed) / 2000 - 0.2) < 0.03  # 2000 draws: 3 % is ~3.4 sd
    for alone, load in changed[:50]:
        assert alone is not None and load.flip_at is not None
        at = load.flip_at
        assert 0 <= at < 20
        assert [alone.piece(i) for i in range(at)] == [load.piece(i) for i in range(at)]
        assert alone.piece(at) != load.piece(at)
        assert all(abs(alone.logprob(i) - load.logprob(i)) <= LOGPROB_DRIFT + 1e-12
                   for i in range(at))
    # the same seed plants the same flips; no share plants none
    again = [a.diverged(20, share=0.2, sim_seed=3) for a in answers if a is not None]
    assert again == flipped
    assert all(a.diverged(20, share=0.0, sim_seed=3).flip_at is None
               for a in answers if a is not None)


@pytest.mark.parametrize(("form", "api", "shape"), [
    ("chat", "openai-chat", ChatShape("id", "m", 0, False)),
    ("completions", "openai-completions", CompletionShape("id", "m", 0, False)),
])
def test_its_logprobs_read_back_as_the_client_reads_a_real_server(
        form: str, api: str, shape: object) -> None:
    body = chat("hi") if form == "chat" else {"prompt": "hi", "temperature": 0, "seed": 7,
                                              "logprobs": 1}
    greedy = greedy_answer(form, body)
    assert greedy is not None
    final = shape.final_body(greedy.text(5), 3, 5, "length")  # type: ignore[attr-defined]
    answer = read_answer(api, greedy.with_logprobs(final, 5))
    assert answer.text == greedy.text(5)
    assert answer.tokens == [greedy.piece(i) for i in range(5)]
    assert answer.logprobs == [round(greedy.logprob(i), 6) for i in range(5)]
    assert all(-2.0 <= v <= -0.01 for v in answer.logprobs or [])


def test_no_logprobs_unless_asked() -> None:
    greedy = greedy_answer("chat", chat("hi", logprobs=False))
    assert greedy is not None
    body = ChatShape("id", "m", 0, False).final_body(greedy.text(3), 3, 3, "length")
    assert json.loads(greedy.with_logprobs(body, 3))["choices"][0]["logprobs"] is None
