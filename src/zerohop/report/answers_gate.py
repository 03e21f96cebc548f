"""`zerohop compare --max-answers-changed SHARE`: a candidate run fails when more than
SHARE of its answer probe's answers changed under load (`analysis/comparison/answers.py`). The
point share is gated, as a CI job expects a threshold to read; the console line prints
its 95 % interval beside it, so a reader sees how few prompts stand behind it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zerohop.analysis.comparison.answers import summarise_answers
from zerohop.analysis.run_data import ReportInputError
from zerohop.report.present_answers import share_text
from zerohop.storage.run_reader import read_answers


def answers_gate(run_dirs: Sequence[Path], max_share: float) -> tuple[list[str], bool]:
    """(one line per run, whether any run changed more than `max_share`); a run with no
    answer probe, or none compared, is a `ReportInputError` (nothing to gate on)."""
    if not 0.0 <= max_share <= 1.0:
        raise ReportInputError(f"--max-answers-changed must be in [0, 1], got {max_share:g}")
    lines, failed = [], False
    for run_dir in run_dirs:
        figures = summarise_answers(read_answers(Path(run_dir)))
        if figures is None:
            raise ReportInputError(f"{run_dir}: no answer probe (answers.json) to gate on; "
                                   "make the run with --answer-probe")
        if figures.compared == 0:
            raise ReportInputError(f"{run_dir}: the answer probe compared no answer")
        over = figures.share > max_share
        failed |= over
        lines.append(f"{run_dir}: answers under load: {share_text(figures)} — "
                     f"{'over' if over else 'within'} --max-answers-changed {max_share:g}")
    return lines, failed
