"""Did the load change the answers? The answer probe's figures (`zerohop run
--answer-probe`, `loadgen/answer_probe.py`) from its answers.json.

Each prompt was answered at temperature 0 with a fixed seed, once alone before the load
and once beside it. A pair is compared when both answers ended ok and the one under
load was sent after the load began and finished before it ended. Its answers are
compared token by token: by token id where both answers name them, else by token
string, else (a server that gave no logprobs) by the words of the text — the unit is
said with the figures. Per pair: the same tokens or not, the index of the first one
that differs (a longer answer that only extends the other differs where the shorter
ends), and the largest absolute logprob change among the tokens before it (all of
them, when the answers are the same; NaN where either answer had no logprobs or no
token precedes the difference).

Over the pairs: the share that changed, with its 95 % Wilson score interval (a
binomial proportion of a few dozen pairs: the normal approximation's interval would
leave [0, 1] or shrink to nothing at 0 changes), and the median first-difference
position of those that changed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ALONE, UNDER_LOAD = "alone", "load"
CONFIDENCE_Z = 1.959963984540054  # the normal quantile of a two-sided 95 % interval
_WORDS = re.compile(r"\s*\S+")


@dataclass(frozen=True)
class Answer:
    """One answer as answers.json keeps it."""

    prompt: int
    phase: str
    outcome: str
    sent_ts: float
    end_ts: float
    text: str = ""
    tokens: tuple[str, ...] | None = None
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float | None, ...] | None = None


@dataclass(frozen=True)
class AnswerPair:
    """One prompt alone and under load. `first_difference`: the index (in `unit`s) of
    the first token that differs, None when none does."""

    prompt: int
    unit: str  # "token id", "token" or "word"
    first_difference: int | None
    max_logprob_change: float
    length_alone: int
    length_load: int

    @property
    def same(self) -> bool:
        return self.first_difference is None


@dataclass(frozen=True)
class AnswerFigures:
    """The probe's figures (see the module docstring)."""

    api: str
    model: str
    seed: int | None
    max_tokens: int | None
    prompts: list[str]
    pairs: list[AnswerPair]
    failed_alone: int  # prompts whose answer alone did not end ok
    failed_load: int  # prompts whose answer under load did not end ok
    not_under_load: int  # prompts with no answer wholly inside the load
    changed: int
    share: float  # changed / compared (NaN: none compared)
    ci_low: float
    ci_high: float
    median_first_difference: float  # over the changed pairs (NaN: none changed)
    # the largest over every pair's (NaN: no logprobs, or no token before any difference)
    max_logprob_change: float
    modelled: bool = False  # asked of the embedded target: its divergence is modelled

    @property
    def compared(self) -> int:
        return len(self.pairs)

    @property
    def units(self) -> list[str]:
        return sorted({p.unit for p in self.pairs})


def summarise_answers(document: dict[str, Any] | None, *, modelled: bool = False
                      ) -> AnswerFigures | None:
    """The figures of one answers.json (None when no answer probe ran); `modelled`: the
    answers came from the embedded target (`--answer-divergence` planted what changed)."""
    if document is None:
        return None
    answers = [a for a in (parse_answer(row) for row in document.get("answers") or [])
               if a is not None]
    prompts = [str(p) for p in document.get("prompts") or []]
    load_start = _float(document.get("load_start_ts"), math.nan)
    load_end = _float(document.get("load_end_ts"), math.inf)
    alone = {a.prompt: a for a in answers if a.phase == ALONE}
    loaded = {a.prompt: a for a in answers if a.phase == UNDER_LOAD}
    pairs: list[AnswerPair] = []
    failed_alone = failed_load = not_under_load = 0
    for index in sorted(alone.keys() | loaded.keys() | set(range(len(prompts)))):
        first, second = alone.get(index), loaded.get(index)
        if first is None or first.outcome != "ok":
            failed_alone += 1
            continue
        if second is not None and second.outcome != "ok":
            failed_load += 1
            continue
        if second is None or not (second.sent_ts >= load_start and second.end_ts <= load_end):
            not_under_load += 1
            continue
        pairs.append(compare_pair(first, second))
    changed = sum(1 for p in pairs if not p.same)
    low, high = wilson_interval(changed, len(pairs))
    positions = [p.first_difference for p in pairs if p.first_difference is not None]
    drifts = [p.max_logprob_change for p in pairs if math.isfinite(p.max_logprob_change)]
    return AnswerFigures(
        api=str(document.get("api") or ""), model=str(document.get("model") or ""),
        seed=_int(document.get("seed")), max_tokens=_int(document.get("max_tokens")),
        prompts=prompts, pairs=pairs, failed_alone=failed_alone, failed_load=failed_load,
        not_under_load=not_under_load, changed=changed,
        share=changed / len(pairs) if pairs else math.nan, ci_low=low, ci_high=high,
        median_first_difference=float(np.median(positions)) if positions else math.nan,
        max_logprob_change=max(drifts) if drifts else math.nan, modelled=modelled)


def compare_pair(alone: Answer, load: Answer) -> AnswerPair:
    """One prompt's two answers, compared (see the module docstring)."""
    unit, first_seq, second_seq = _units(alone, load)
    difference = first_difference(first_seq, second_seq)
    before = difference if difference is not None else min(len(first_seq), len(second_seq))
    return AnswerPair(prompt=alone.prompt, unit=unit, first_difference=difference,
                      max_logprob_change=max_logprob_change(alone.logprobs, load.logprobs,
                                                            before),
                      length_alone=len(first_seq), length_load=len(second_seq))


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """The index of the first element that differs; where one only extends the other,
    the shorter's length; None when they are equal."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def max_logprob_change(a: Sequence[float | None] | None, b: Sequence[float | None] | None,
                       before: int) -> float:
    """The largest |a[i] - b[i]| over the first `before` tokens where both have a
    logprob (NaN when there is none to compare)."""
    if a is None or b is None:
        return math.nan
    changes = [abs(x - y) for x, y in zip(a[:before], b[:before], strict=False)
               if x is not None and y is not None]
    return max(changes) if changes else math.nan


def wilson_interval(successes: int, n: int, z: float = CONFIDENCE_Z) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (NaN, NaN for n = 0)."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # at 0 or n successes a bound is exactly 0 or 1 (rounding would leave 1e-17)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def answers_summary(figures: AnswerFigures | None) -> dict[str, Any] | None:
    """summary.json's `answers` block (docs/summary-json.md); NaN is written as null."""
    if figures is None:
        return None
    return {
        "modelled": figures.modelled, "api": figures.api, "model": figures.model,
        "seed": figures.seed,
        "max_tokens": figures.max_tokens, "prompts": len(figures.prompts),
        "compared": figures.compared, "changed": figures.changed,
        "changed_share": figures.share, "changed_share_ci95": [figures.ci_low, figures.ci_high],
        "median_first_difference": figures.median_first_difference,
        "max_logprob_change": figures.max_logprob_change,
        "units": figures.units, "failed_alone": figures.failed_alone,
        "failed_load": figures.failed_load, "not_under_load": figures.not_under_load,
        "pairs": [{"prompt": p.prompt, "same": p.same, "first_difference": p.first_difference,
                   "max_logprob_change": p.max_logprob_change, "unit": p.unit,
                   "length_alone": p.length_alone, "length_load": p.length_load}
                  for p in figures.pairs],
    }


def answers_of_run(answers: dict[str, Any] | None, manifest: dict[str, Any]
                   ) -> AnswerFigures | None:
    """A run's figures: its answers.json, modelled when its target was the embedded one."""
    target = manifest.get("target")
    kind = target.get("kind") if isinstance(target, dict) else None
    return summarise_answers(answers, modelled=kind == "embedded")


def _units(alone: Answer, load: Answer) -> tuple[str, Sequence[Any], Sequence[Any]]:
    if alone.token_ids is not None and load.token_ids is not None:
        return "token id", alone.token_ids, load.token_ids
    if alone.tokens is not None and load.tokens is not None:
        return "token", alone.tokens, load.tokens
    return "word", _WORDS.findall(alone.text), _WORDS.findall(load.text)


def parse_answer(row: Any) -> Answer | None:
    """One entry of answers.json's `answers` (None when it names no prompt)."""
    if not isinstance(row, dict) or _int(row.get("prompt")) is None:
        return None
    return Answer(
        prompt=int(row["prompt"]), phase=str(row.get("phase")),
        outcome=str(row.get("outcome")), sent_ts=_float(row.get("sent_ts"), math.nan),
        end_ts=_float(row.get("end_ts"), math.nan),
        text=row["text"] if isinstance(row.get("text"), str) else "",
        tokens=_sequence(row.get("tokens"), str), token_ids=_sequence(row.get("token_ids"), int),
        logprobs=_logprobs(row.get("logprobs")))


def _sequence(value: Any, kind: type) -> tuple[Any, ...] | None:
    if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool)
                                              for v in value):
        return None
    return tuple(value)


def _logprobs(value: Any) -> tuple[float | None, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
                 for v in value)


def _float(value: Any, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
