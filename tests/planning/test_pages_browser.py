"""The capacity and nightly pages draw their charts in a real browser — pixels in
every chart's plotting area, not only a <canvas> element — with no script errors (the
report's CSP and chart script are shared with the run report)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.chromium import blank_charts, chart_ink, open_page
from tests.planning.fakes import synthetic_runner, write_fake_run
from zerohop.cli import cli
from zerohop.planning.nightly import NightlyConfig, run_nightly
from zerohop.planning.sweep import SweepPlan, run_sweep
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import RunResult

pytestmark = pytest.mark.browser


def drawn_charts(path: Path, shot: Path) -> tuple[list[str], dict[str, int]]:
    """Script errors on the page, and chart id → ink for every chart on it."""
    with open_page(path) as (page, events):
        ink = chart_ink(page)
        page.screenshot(path=str(shot), full_page=True)
    return events.errors + events.dialogs, ink


def test_capacity_page_draws_its_charts(tmp_path: Path) -> None:
    base = RunPlan(host="http://127.0.0.1:9", api="openai-chat", workloads=[], classes=[],
                   users=8, rate=None, duration_s=20, telemetry="none", slo={}, name="t",
                   workers=0, results_dir=tmp_path, seed=1)
    folder = run_sweep(SweepPlan(base=base, mode="rate", loads=[1, 2, 4, 6, 8, 9.5]),
                       runner=synthetic_runner).sweep_dir
    result = CliRunner().invoke(cli, ["capacity", str(folder), "--slo",
                                      "ttft_p99_ms=100,tpot_p99_ms=30", "--traffic", "50"])
    assert result.exit_code == 0, result.output
    errors, ink = drawn_charts(folder / "capacity.html", tmp_path / "capacity.png")
    assert errors == []
    assert len(ink) >= 3
    assert blank_charts(ink) == {}


def test_nightly_page_draws_trends(tmp_path: Path) -> None:
    seeds = itertools.count(1)

    def runner(plan: RunPlan) -> RunResult:
        seed = next(seeds)
        return RunResult(write_fake_run(plan.results_dir, f"{plan.name}-{seed}", rate_rps=10,
                                        duration_s=10, tpot_ms=20 if seed < 7 else 25,
                                        seed=seed), 0, None)

    config = NightlyConfig.model_validate({"name": "ci", "samples": 2})
    for _ in range(4):
        run_nightly(config, tmp_path, runner=runner)
    errors, ink = drawn_charts(tmp_path / "latest.html", tmp_path / "nightly.png")
    assert errors == []
    assert len(ink) >= 3
    assert blank_charts(ink) == {}
