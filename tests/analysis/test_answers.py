"""The answer probe's analysis on hand-made answers: each figure recomputed here by a
plain route of its own (the first difference by hand, the logprob change from the
written numbers, the Wilson interval as the roots of its quadratic)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from zerohop.analysis.comparison.answers import (
    answers_of_run,
    answers_summary,
    compare_pair,
    summarise_answers,
    wilson_interval,
)

pytestmark = pytest.mark.unit

LOAD_START, LOAD_END = 100.0, 200.0


def answer(prompt: int, phase: str, tokens: list[str] | None, logprobs: list[float] | None = None,
           *, ids: list[int] | None = None, outcome: str = "ok", sent: float | None = None,
           end: float | None = None, text: str | None = None) -> dict[str, Any]:
    at = sent if sent is not None else (10.0 if phase == "alone" else 150.0)
    return {"prompt": prompt, "phase": phase, "outcome": outcome, "sent_ts": at,
            "end_ts": end if end is not None else at + 1.0,
            "text": text if text is not None else "".join(tokens or []),
            "tokens": tokens, "token_ids": ids, "logprobs": logprobs}


def document(answers: list[dict[str, Any]], prompts: int) -> dict[str, Any]:
    return {"schema": "zerohop.answers", "api": "openai-chat", "model": "m", "seed": 1234,
            "max_tokens": 8, "prompts": [f"p{i}" for i in range(prompts)],
            "load_start_ts": LOAD_START, "load_end_ts": LOAD_END, "answers": answers}


def wilson_by_roots(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The p for which |k/n - p| = z·sqrt(p(1-p)/n): the roots of
    (1 + z²/n) p² - (2k/n + z²/n) p + (k/n)² = 0."""
    phat = k / n
    a, b, c = 1 + z * z / n, -(2 * phat + z * z / n), phat * phat
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


def test_a_pair_differs_where_the_first_token_does() -> None:
    alone = answer(0, "alone", [" a", " b", " c", " d"], [-0.1, -0.2, -0.3, -0.4])
    load = answer(0, "load", [" a", " b", " x", " d"], [-0.15, -0.2, -0.9, -0.4])
    pair = compare_pair(*[_parsed(a) for a in (alone, load)])
    assert pair.first_difference == 2 and not pair.same and pair.unit == "token"
    # before index 2: |-0.1 - -0.15| = 0.05 and 0: the largest is 0.05 (index 2's 0.6 is not)
    assert pair.max_logprob_change == pytest.approx(0.05)


def test_the_same_answer_has_no_difference_and_compares_every_logprob() -> None:
    pair = compare_pair(_parsed(answer(1, "alone", [" a", " b"], [-1.0, -2.0])),
                        _parsed(answer(1, "load", [" a", " b"], [-1.0, -2.25])))
    assert pair.same and pair.first_difference is None
    assert pair.max_logprob_change == pytest.approx(0.25)


def test_an_answer_that_only_extends_the_other_differs_where_the_shorter_ends() -> None:
    pair = compare_pair(_parsed(answer(2, "alone", [" a", " b"])),
                        _parsed(answer(2, "load", [" a", " b", " c"])))
    assert pair.first_difference == 2 and (pair.length_alone, pair.length_load) == (2, 3)
    assert math.isnan(pair.max_logprob_change)  # no logprobs given


def test_a_difference_at_the_first_token_has_no_logprob_before_it() -> None:
    pair = compare_pair(_parsed(answer(3, "alone", [" a"], [-0.5])),
                        _parsed(answer(3, "load", [" b"], [-0.7])))
    assert pair.first_difference == 0 and math.isnan(pair.max_logprob_change)


def test_token_ids_win_over_strings_and_words_stand_in_without_tokens() -> None:
    # the same text in two tokenizations: the ids tell them apart, the strings do not
    by_id = compare_pair(_parsed(answer(4, "alone", [" ab"], ids=[7])),
                         _parsed(answer(4, "load", [" ab"], ids=[8])))
    assert by_id.unit == "token id" and by_id.first_difference == 0
    words = compare_pair(_parsed(answer(5, "alone", None, text="one two three")),
                         _parsed(answer(5, "load", None, text="one two four")))
    assert words.unit == "word" and words.first_difference == 2


def test_the_share_its_interval_and_the_median_position() -> None:
    rows = []
    # 10 prompts; prompts 0, 3, 4 change at tokens 1, 5, 2; the rest are the same
    changes = {0: 1, 3: 5, 4: 2}
    for prompt in range(10):
        tokens = [f" t{i}" for i in range(6)]
        other = list(tokens)
        if prompt in changes:
            other[changes[prompt]] = " flipped"
        rows += [answer(prompt, "alone", tokens, [-0.5] * 6),
                 answer(prompt, "load", other, [-0.5] * 5 + [-0.75])]
    figures = summarise_answers(document(rows, 10))
    assert figures is not None
    assert (figures.compared, figures.changed) == (10, 3) and figures.share == pytest.approx(0.3)
    low, high = wilson_by_roots(3, 10)
    assert (figures.ci_low, figures.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert figures.median_first_difference == 2  # of 1, 2, 5
    # prompt 3 changes at index 5: its logprobs before it are equal; only the same
    # answers compare index 5 (-0.5 against -0.75)
    assert figures.max_logprob_change == pytest.approx(0.25)


def test_only_answers_wholly_under_load_are_compared() -> None:
    tokens = [" a", " b"]
    rows = [
        answer(0, "alone", tokens), answer(0, "load", tokens),  # compared
        answer(1, "alone", tokens), answer(1, "load", tokens, end=LOAD_END + 1),  # ran past
        answer(2, "alone", tokens), answer(2, "load", tokens, sent=LOAD_START - 1),  # early
        answer(3, "alone", tokens, outcome="http_503"), answer(3, "load", tokens),
        answer(4, "alone", tokens), answer(4, "load", None, outcome="timeout"),
        answer(5, "alone", tokens),  # never asked under load
    ]
    figures = summarise_answers(document(rows, 7))  # prompt 6 was never answered alone
    assert figures is not None
    assert figures.compared == 1 and figures.not_under_load == 3
    assert (figures.failed_alone, figures.failed_load) == (2, 1)


def test_wilson_interval_at_the_edges() -> None:
    for n in range(1, 40):  # exactly 0 and 1 at the ends, as printed ("[0.0 %, …]")
        low, high = wilson_interval(0, n)
        assert low == 0.0 and high == pytest.approx(wilson_by_roots(0, n)[1])
        low, high = wilson_interval(n, n)
        assert high == 1.0 and low == pytest.approx(wilson_by_roots(n, n)[0])
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_the_summary_block_and_the_embedded_target_marked_modelled() -> None:
    rows = [answer(0, "alone", [" a"]), answer(0, "load", [" b"])]
    block = answers_summary(answers_of_run(document(rows, 1), {"target": {"kind": "embedded"}}))
    assert block is not None and block["modelled"] is True
    assert (block["compared"], block["changed"], block["changed_share"]) == (1, 1, 1.0)
    assert block["pairs"] == [{"prompt": 0, "same": False, "first_difference": 0,
                               "max_logprob_change": pytest.approx(math.nan, nan_ok=True),
                               "unit": "token", "length_alone": 1, "length_load": 1}]
    assert answers_summary(answers_of_run(None, {})) is None
    external = answers_of_run(document(rows, 1), {"target": {"kind": "external"}})
    assert external is not None and not external.modelled


def _parsed(row: dict[str, Any]) -> Any:
    from zerohop.analysis.comparison.answers import parse_answer

    parsed = parse_answer(row)
    assert parsed is not None
    return parsed
