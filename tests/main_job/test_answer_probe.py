"""`zerohop run --answer-probe` on the embedded target with a planted divergence share:
summary.json's `answers` block recomputed from the probe's own answers.json, the
prompts that changed are those the target planted, and the planted share lies in the
interval. About 15 s (sized by --requests)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from tests.analysis.test_answers import wilson_by_roots
from tests.main_job.test_run_command import zerohop
from zerohop.loadgen.answer_probe import ANSWER_SEED, answer_prompts
from zerohop.sim.answers.greedy_answer import greedy_answer

pytestmark = pytest.mark.integration

SHARE, SIM_SEED = 0.5, 3


def test_the_answer_probe_finds_the_planted_share(tmp_path: Path) -> None:
    workload = tmp_path / "busy.yaml"  # 4 closed-loop users: the engine is never idle
    workload.write_text("kind: short_query_flood\nname: busy\ninput_tokens: 32\n"
                        "max_tokens: 64\nload: {kind: closed, users: 4}\n")
    res = zerohop("run", "--requests", "60", "--workload", str(workload), "--answer-probe",
                  "--sim-args", f"--answer-divergence {SHARE} --seed {SIM_SEED}",
                  "--telemetry", "none", "--no-report", "--results-dir", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-3000:]
    [run] = list((tmp_path / "r").iterdir())
    probe = json.loads((run / "answers.json").read_text())
    block = json.loads((run / "summary.json").read_text())["answers"]

    # recomputed from the answers: both rounds whole, the second inside the load
    alone = {a["prompt"]: a for a in probe["answers"] if a["phase"] == "alone"}
    load = {a["prompt"]: a for a in probe["answers"] if a["phase"] == "load"}
    inside = {i: a for i, a in load.items() if a["outcome"] == "ok"
              and probe["load_start_ts"] <= a["sent_ts"] and a["end_ts"] <= probe["load_end_ts"]}
    assert len(alone) == len(answer_prompts()) and len(inside) >= 12
    changed, positions = [], []
    for i, second in inside.items():
        first = alone[i]
        if first["tokens"] != second["tokens"]:
            changed.append(i)
            positions.append(next(k for k, (x, y) in enumerate(
                zip(first["tokens"], second["tokens"], strict=True)) if x != y))
    assert changed, "no answer changed: the target was never busy, or planted nothing"
    assert block["modelled"] is True and block["units"] == ["token"]
    assert (block["compared"], block["changed"]) == (len(inside), len(changed))
    assert block["changed_share"] == pytest.approx(len(changed) / len(inside))
    assert block["changed_share_ci95"] == pytest.approx(
        list(wilson_by_roots(len(changed), len(inside))))
    assert block["median_first_difference"] == statistics.median(positions)
    assert [p["prompt"] for p in block["pairs"]] == sorted(inside)

    # the prompts that changed are those the target planted (its own draw, per prompt)
    planted = []
    for i in inside:
        body = {"messages": [{"role": "user", "content": answer_prompts()[i]}],
                "temperature": 0.0, "seed": ANSWER_SEED}
        greedy = greedy_answer("chat", body)
        assert greedy is not None
        if greedy.diverged(len(alone[i]["tokens"]), share=SHARE,
                           sim_seed=SIM_SEED).flip_at is not None:
            planted.append(i)
    assert sorted(changed) == sorted(planted) and changed  # the sim was busy every time
    low, high = block["changed_share_ci95"]
    assert low <= SHARE <= high
    assert not math.isnan(block["max_logprob_change"])
