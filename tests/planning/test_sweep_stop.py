"""`zerohop sweep --stop-when-saturated`: an explicit list stops at the first point whose
run found the target saturated, and names the points skipped and the load time saved."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.planning.fakes import synthetic_runner
from zerohop.core.layout import SUMMARY_FILE
from zerohop.planning.sweep import SweepPlan, read_index, run_sweep
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import RunResult

pytestmark = pytest.mark.unit
SATURATED_FROM = 60.0  # the fake target falls behind from this rate on
STOPPED_AT_S = 17.0  # ... and its live verdict stopped that point's load here


def runner(plan: RunPlan) -> RunResult:
    """The synthetic point, with the summary.json block its run would have written."""
    result = synthetic_runner(dataclasses.replace(plan, rate=min(plan.rate or 1.0, 8.0)))
    saturated = (plan.rate or 0.0) >= SATURATED_FROM
    block = {"saturated": saturated, "since_s": 4.0 if saturated else None,
             "signal": "first_token_wait" if saturated else None,
             "live": {"stopped_at_s": STOPPED_AT_S, "planned_s": plan.duration_s}
             if saturated and plan.stop_when_saturated else None}
    (result.run_dir / SUMMARY_FILE).write_text(json.dumps({"saturation": block}))
    return result


def plan(tmp_path: Path, *, stop: bool) -> SweepPlan:
    base = RunPlan(host="http://127.0.0.1:9", api="openai-chat", workloads=[], classes=[],
                   users=8, rate=None, duration_s=25, telemetry="none", slo={}, name="t",
                   workers=0, results_dir=tmp_path, seed=1, stop_when_saturated=stop)
    return SweepPlan(base=base, mode="rate", loads=[4, 60, 90, 120])


def test_the_sweep_stops_at_the_first_saturated_point(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    result = run_sweep(plan(tmp_path, stop=True), runner=runner)
    assert [p.load for p in result.points] == [4, 60]
    stop = result.early_stop
    assert stop is not None and stop.load == 60 and stop.skipped == [90, 120]
    assert stop.saved_s == pytest.approx(2 * 25 + (25 - STOPPED_AT_S))
    assert ("stopped at the first saturated point (rate 60); skipped 90, 120; 58 s of load "
            "saved") in capsys.readouterr().out
    saturated = read_index(result.sweep_dir)["points"][-1]
    assert saturated.saturated and "first-token wait" in (saturated.reason or "")


def test_without_the_flag_every_point_runs(tmp_path: Path) -> None:
    result = run_sweep(plan(tmp_path, stop=False), runner=runner)
    assert [p.load for p in result.points] == [4, 60, 90, 120]
    assert result.early_stop is None
