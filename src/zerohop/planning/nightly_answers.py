"""The nightly's answer gate (`answers:` in the profile): every sample runs the answer
probe (`zerohop run --answer-probe`, docs/answers-under-load.md), and the night fails
when the share of its answers that changed under load, pooled over the samples, is over
`max_changed` — `zerohop compare --max-answers-changed` for a night. Pooled, because one
sample's few dozen prompts give a wide interval; the interval is kept beside the share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zerohop.analysis.comparison.answers import summarise_answers, wilson_interval
from zerohop.report import formatting as fmt
from zerohop.storage.run_reader import read_answers


def answers_gate(sample_dirs: Sequence[Path], max_changed: float | None) -> dict[str, Any]:
    """The night's answers: changed and compared pairs per sample and pooled, the
    pooled share with its 95 % Wilson interval, and whether it fails the gate (a night
    whose probe compared nothing fails it: there is nothing to vouch for its answers)."""
    per_sample = []
    for run_dir in sample_dirs:
        figures = summarise_answers(read_answers(Path(run_dir)))
        per_sample.append({"changed": figures.changed if figures else 0,
                           "compared": figures.compared if figures else 0})
    changed = sum(s["changed"] for s in per_sample)
    compared = sum(s["compared"] for s in per_sample)
    low, high = wilson_interval(changed, compared)
    share = changed / compared if compared else math.nan
    failed = max_changed is not None and (compared == 0 or share > max_changed)
    return {"changed": changed, "compared": compared, "share": share, "ci95": [low, high],
            "max_changed": max_changed, "failed": failed, "samples": per_sample}


def answers_line(gate: dict[str, Any]) -> str:
    """`answers under load: 3 of 48 changed (6.25 % [2.1 %, 16.8 %]) over 3 samples —
    within max_changed 0.1`, as the console and the page say it."""
    samples = len(gate["samples"])
    if not gate["compared"]:
        words = f"no answer compared over {samples} samples"
    else:
        low, high = gate["ci95"]
        words = (f"{gate['changed']} of {gate['compared']} changed "
                 f"({fmt.pct(100 * gate['share'])} [{fmt.pct(100 * low)}, "
                 f"{fmt.pct(100 * high)}]) over {samples} samples")
    line = f"answers under load: {words}"
    if gate["max_changed"] is not None:
        verdict = ("within" if not gate["failed"] else "over" if gate["compared"]
                   else "failing, with nothing to vouch for the answers,")
        line += f" — {verdict} answers.max_changed {gate['max_changed']:g}"
    return line
