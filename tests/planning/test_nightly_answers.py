"""`answers:` in a nightly profile: every sample runs the answer probe, and the night
fails when the share of answers changed under load, pooled over its samples, is over
`max_changed` (src/zerohop/planning/nightly_answers.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.analysis.test_answers import answer, document, wilson_by_roots
from tests.planning.fakes import write_fake_run
from zerohop.cli import cli
from zerohop.core.layout import ANSWERS_FILE
from zerohop.planning.nightly import NightlyConfig, run_nightly
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import RunResult

pytestmark = pytest.mark.unit

PROMPTS = 16


def probed_target(changed: Iterator[int], asked: list[bool]) -> Callable[[RunPlan], RunResult]:
    """Each sample a fake run with an answers.json in which the next `changed` of its
    PROMPTS answers differ under load; `asked` records whether the plan asked for it."""
    def runner(plan: RunPlan) -> RunResult:
        asked.append(plan.answer_probe)
        run_dir = write_fake_run(plan.results_dir, f"{plan.name}-{len(asked)}", rate_rps=10,
                                 duration_s=15, seed=len(asked))
        differ = next(changed)
        rows = []
        for prompt in range(PROMPTS):
            rows += [answer(prompt, "alone", [" a", " b"], [-0.1, -0.2]),
                     answer(prompt, "load", [" a", " x"] if prompt < differ else [" a", " b"],
                            [-0.1, -0.2])]
        (run_dir / ANSWERS_FILE).write_text(json.dumps(document(rows, PROMPTS)))
        return RunResult(run_dir, 0, None)

    return runner


def profile(**answers: object) -> NightlyConfig:
    return NightlyConfig.model_validate({"name": "ci", "samples": 3, "answers": answers,
                                         "load": {"rate": 10, "duration_s": 15}})


def test_the_night_fails_on_the_pooled_share_of_changed_answers(tmp_path: Path) -> None:
    asked: list[bool] = []
    first = run_nightly(profile(probe=True, max_changed=0.1), tmp_path,
                        runner=probed_target(iter([0, 1, 2]), asked))
    assert asked == [True] * 3  # every sample ran the probe
    gate = first.entry["answers"]
    assert (gate["changed"], gate["compared"]) == (3, 48)  # 0 + 1 + 2 of 3 × 16
    assert gate["share"] == pytest.approx(3 / 48)
    assert gate["ci95"] == pytest.approx(list(wilson_by_roots(3, 48)))
    assert first.entry["status"] == "baseline" and first.exit_code == 0
    assert any(note.startswith("answers under load: 3 of 48 changed (6.2")
               and note.endswith("within answers.max_changed 0.1")
               for note in first.entry["notes"])
    # 2 + 3 + 4 of 48: 18.8 % > 10 %, with latencies unchanged
    worse = run_nightly(profile(probe=True, max_changed=0.1), tmp_path,
                        runner=probed_target(iter([2, 3, 4]), asked))
    assert worse.exit_code == 1 and worse.entry["status"] == "regression"
    assert worse.entry["regressions"] == ["answers changed"]
    assert worse.entry["answers"]["share"] == pytest.approx(9 / 48)
    page = (tmp_path / "latest.html").read_text(encoding="utf-8")
    assert "REGRESSION: answers changed" in page and "over answers.max_changed 0.1" in page


def test_the_probe_without_a_gate_only_reports_and_keeps_its_own_baseline(
        tmp_path: Path) -> None:
    asked: list[bool] = []
    plain = run_nightly(profile(), tmp_path, runner=probed_target(iter([0, 0, 0]), asked))
    probed = run_nightly(profile(probe=True), tmp_path,
                         runner=probed_target(iter([5, 5, 5]), asked))
    assert asked == [False] * 3 + [True] * 3
    assert "answers" not in plain.entry
    assert probed.entry["answers"]["failed"] is False and probed.exit_code == 0
    # the probe's requests share the load: a probed night is not compared with a plain one
    assert probed.entry["fingerprint"] != plain.entry["fingerprint"]
    assert probed.entry["status"] == "baseline"
    assert profile().fingerprint() == NightlyConfig.model_validate(
        {"name": "ci", "samples": 3, "load": {"rate": 10, "duration_s": 15}}).fingerprint()


@pytest.mark.parametrize(
    ("text", "words"),
    [("answers: {max_changed: 0.1}\n", "set probe: true"),
     ("answers: {probe: true, max_changed: 1.5}\n", "answers.max_changed"),
     ("target: {api: anthropic}\nanswers: {probe: true}\n",
      "answers.probe: the answer probe needs")],
)
def test_a_bad_answers_setting_exits_2_naming_it(tmp_path: Path, text: str,
                                                words: str) -> None:
    path = tmp_path / "n.yaml"
    path.write_text("name: x\n" + text)
    result = CliRunner().invoke(cli, ["nightly", "--config", str(path), "--history",
                                      str(tmp_path / "h")])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
