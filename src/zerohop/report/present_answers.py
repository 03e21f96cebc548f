"""The answer probe's section: did the load change the answers (`analysis/comparison/answers.py`),
as the page, the console and `zerohop compare --max-answers-changed` say it — one
reading, so they cannot disagree."""

from __future__ import annotations

import math
from typing import Any

from zerohop.analysis.comparison.answers import AnswerFigures, AnswerPair
from zerohop.report import formatting as fmt

PROMPT_CHARS = 60  # a prompt's text in the table, cut to this
# what the probe cannot tell apart, said wherever its figures are (docs/answers-under-load.md)
BLIND_SPOTS = (
    "A server that ignores the seed and samples anyway (temperature 0 read as 'low'), a "
    "model swapped or reloaded between the two rounds, and a cache that returns a stored "
    "answer (same answer whatever the batch) all look like this probe's findings or hide "
    "them: a changed answer says the answers differ, not why; an unchanged one says the "
    "server answered the same, not that it decoded the same.")


def share_text(figures: AnswerFigures) -> str:
    """`3 of 16 changed (18.8 % [6.6 %, 43.0 %])`, or why there is no share."""
    if figures.compared == 0:
        return "no answer could be compared"
    return (f"{figures.changed} of {figures.compared} changed "
            f"({fmt.pct(100 * figures.share)} {_pct_interval(figures.ci_low, figures.ci_high)})")


def console_line(figures: AnswerFigures | None) -> str | None:
    """One line: the changed share and where the changed answers diverge."""
    if figures is None:
        return None
    line = f"answers under load: {share_text(figures)}"
    if figures.changed:
        unit = " or ".join(figures.units)
        line += f"; they diverge at {unit} {_position(figures.median_first_difference)} (median)"
    left_out = figures.failed_alone + figures.failed_load + figures.not_under_load
    if left_out:
        line += f"; {left_out} prompt(s) not compared"
    return line


def answers_section(figures: AnswerFigures | None) -> dict[str, Any] | None:
    """The page's context (None: no answer probe ran)."""
    if figures is None:
        return None
    return {
        "line": console_line(figures), "api": figures.api, "model": figures.model,
        "seed": figures.seed, "max_tokens": figures.max_tokens,
        "prompts": len(figures.prompts), "compared": figures.compared,
        "failed_alone": figures.failed_alone, "failed_load": figures.failed_load,
        "not_under_load": figures.not_under_load,
        "max_logprob_change": _logprob(figures.max_logprob_change),
        "rows": [_row(pair, figures.prompts) for pair in figures.pairs],
        "blind_spots": BLIND_SPOTS,
        "modelled": figures.modelled,
    }


def _row(pair: AnswerPair, prompts: list[str]) -> dict[str, Any]:
    text = prompts[pair.prompt] if 0 <= pair.prompt < len(prompts) else ""
    if len(text) > PROMPT_CHARS:
        text = text[: PROMPT_CHARS - 1] + "…"
    return {"prompt": pair.prompt + 1, "text": text, "same": "same" if pair.same else "changed",
            "changed": not pair.same,
            "first_difference": "—" if pair.first_difference is None else
            f"{pair.unit} {pair.first_difference}",
            "lengths": f"{pair.length_alone} / {pair.length_load}",
            "logprob": _logprob(pair.max_logprob_change)}


def _pct_interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return fmt.DASH
    return f"[{fmt.pct(100 * low)}, {fmt.pct(100 * high)}]"


def _position(value: float) -> str:
    return fmt.DASH if not math.isfinite(value) else f"{value:g}"


def _logprob(value: float) -> str:
    return fmt.DASH if not math.isfinite(value) else f"{value:.3g}"
