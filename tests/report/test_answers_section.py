"""The answer probe on the page, in summary.json (every key documented) and as
`zerohop compare --max-answers-changed`'s gate, on a synthetic run with a hand-made
answers.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.test_answers import answer, document, wilson_by_roots
from tests.synthetic_runs import HOSTILE, SyntheticRun, write_run
from zerohop.analysis.run_data import ReportInputError
from zerohop.core.layout import ANSWERS_FILE
from zerohop.report.answers_gate import answers_gate
from zerohop.report.build import build_report
from zerohop.storage.summary_file import write_summary

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[2] / "docs" / "summary-json.md"


def run_with_answers(root: Path, changed: int, of: int) -> Path:
    run_dir = write_run(root, SyntheticRun(n_requests=50))
    rows = []
    for prompt in range(of):
        tokens = [" a", " b", " c"]
        rows += [answer(prompt, "alone", tokens, [-0.1, -0.2, -0.3]),
                 answer(prompt, "load", [" a", " x", " c"] if prompt < changed else tokens,
                        [-0.1, -0.2, -0.3])]
    doc = document(rows, of)
    doc["prompts"][0] = HOSTILE  # a prompt's text is printed escaped
    (run_dir / ANSWERS_FILE).write_text(json.dumps(doc))
    return run_dir


def key_paths(value: Any, prefix: str) -> set[str]:
    if isinstance(value, dict):
        return {p for key, item in value.items()
                for p in {f"{prefix}.{key}"} | key_paths(item, f"{prefix}.{key}")}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return set().union(*(key_paths(item, prefix + "[]") for item in value))
    return set()


def test_summary_json_carries_the_figures_and_the_page_lists_every_key(tmp_path: Path) -> None:
    run_dir = run_with_answers(tmp_path, changed=3, of=8)
    block = json.loads(write_summary(run_dir).read_text())["answers"]
    assert (block["compared"], block["changed"]) == (8, 3)
    assert block["changed_share"] == pytest.approx(3 / 8)
    assert block["changed_share_ci95"] == pytest.approx(list(wilson_by_roots(3, 8)))
    assert block["median_first_difference"] == 1 and block["max_logprob_change"] == 0.0
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## The answers block\n", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))
    assert key_paths(block, "answers") == documented
    assert re.search(r"^\| `answers` \|", text, flags=re.MULTILINE)  # in the top level


def test_the_page_says_the_share_and_escapes_the_prompts(tmp_path: Path) -> None:
    run_dir = run_with_answers(tmp_path, changed=2, of=5)
    html = build_report(run_dir).read_text()
    section = html.split('<section id="answers">', 1)[1].split("</section>", 1)[0]
    low, high = wilson_by_roots(2, 5)
    assert f"2 of 5 changed (40.0 % [{100 * low:.1f} %, {100 * high:.1f} %])" in section
    assert "they diverge at token 1 (median)" in section
    assert "What it cannot tell apart" in section and HOSTILE not in section
    assert section.count("<strong>changed</strong>") == 2
    assert 'href="#answers"' in html


def test_compare_gates_on_the_changed_share(tmp_path: Path) -> None:
    few, many = run_with_answers(tmp_path / "a", 1, 10), run_with_answers(tmp_path / "b", 4, 10)
    lines, failed = answers_gate([few], 0.2)
    assert not failed and "1 of 10 changed" in lines[0] and "within" in lines[0]
    lines, failed = answers_gate([few, many], 0.2)
    assert failed and "4 of 10 changed" in lines[1] and "over" in lines[1]
    assert answers_gate([many], 0.4) == ([lines[1].replace("over", "within")
                                          .replace("changed 0.2", "changed 0.4")], False)
    bare = write_run(tmp_path / "c", SyntheticRun(n_requests=20))
    with pytest.raises(ReportInputError, match="--answer-probe"):
        answers_gate([bare], 0.2)
    with pytest.raises(ReportInputError, match=r"\[0, 1\]"):
        answers_gate([few], 1.5)
