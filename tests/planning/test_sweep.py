from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.planning.fakes import synthetic_runner
from zerohop.cli import cli
from zerohop.planning.sweep import (
    AutoSearch,
    PointSummary,
    SaturationRule,
    SweepPlan,
    judge_saturation,
    read_index,
    run_sweep,
)
from zerohop.planning.sweep_cli import parse_loads
from zerohop.runner.plan import RunPlan

pytestmark = pytest.mark.unit


def point(load: float, *, phase: str = "coarse", saturated: bool = False, achieved: float = 0,
          offered: float = math.nan, ttft_p99: float = 50.0, errors: float = 0.0,
          mode: str = "rate") -> PointSummary:
    return PointSummary(
        load=load, mode=mode, phase=phase, run_dir="x", requests=100,  # type: ignore[arg-type]
        offered_rps=offered, achieved_rps=achieved or load, output_tokens_per_s=1.0,
        error_pct=errors, ttft_p50_ms=ttft_p99 / 2, ttft_p99_ms=ttft_p99, tpot_p50_ms=10.0,
        tpot_p99_ms=12.0, e2e_p50_ms=100.0, e2e_p99_ms=200.0, saturated=saturated,
    )


def test_auto_search_goes_coarse_then_dense_and_stops_early() -> None:
    search = AutoSearch("rate", start=1, factor=2, max_load=64, dense=3)
    seen = []
    healthy_up_to = 5.0
    while (step := search.next_load()) is not None:
        load, phase = step
        seen.append((load, phase))
        search.observe(point(load, phase=phase, saturated=load > healthy_up_to))
    # coarse 1, 2, 4, 8 (saturated) → dense 5, 6 (saturated: stop before 7)
    assert seen == [(1, "coarse"), (2, "coarse"), (4, "coarse"), (8, "coarse"),
                    (5, "dense"), (6, "dense")]


def test_auto_search_stops_at_max_load_when_never_saturated() -> None:
    search = AutoSearch("rate", start=1, factor=3, max_load=10, dense=2)
    loads = []
    while (step := search.next_load()) is not None:
        loads.append(step[0])
        search.observe(point(step[0], phase=step[1]))
    assert loads == [1, 3, 9]


def test_auto_search_users_are_integers_and_distinct() -> None:
    search = AutoSearch("users", start=1, factor=1.5, max_load=4, dense=4)
    loads = []
    while (step := search.next_load()) is not None:
        loads.append(step[0])
        search.observe(point(step[0], phase=step[1], saturated=step[0] >= 3, mode="users"))
    assert loads == [1, 2, 3]  # 1.5 rounds to 2; nothing integer lies between 2 and 3
    assert all(x == int(x) for x in loads)


def test_auto_search_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="factor"):
        AutoSearch("rate", start=1, factor=1.0)
    with pytest.raises(ValueError, match="start"):
        AutoSearch("rate", start=0)


def test_saturation_rules() -> None:
    rule = SaturationRule()
    light = point(1, ttft_p99=40)
    assert judge_saturation(point(2, ttft_p99=80), [light], rule) is None
    assert "TTFT" in (judge_saturation(point(8, ttft_p99=900), [light], rule) or "")
    assert "achieved" in (judge_saturation(point(8, achieved=5, offered=8), [light], rule) or "")
    assert "errors" in (judge_saturation(point(4, errors=9.0), [light], rule) or "")
    # users mode: doubling users but gaining 10 % throughput is saturation
    u2 = point(2, achieved=4.0, mode="users")
    assert "gained" in (judge_saturation(point(4, achieved=4.4, mode="users"), [u2], rule) or "")
    assert judge_saturation(point(4, achieved=7.5, mode="users"), [u2], rule) is None
    # a low absolute TTFT never counts as an explosion
    assert judge_saturation(point(4, ttft_p99=45), [point(1, ttft_p99=2)], rule) is None


def test_a_short_points_p99_never_decides_its_saturation() -> None:
    """TTFT growth is judged at the highest percentile both points have the requests
    for (p99: 100, p90: 10, p50: 2); with none, not at all."""
    rule = SaturationRule()

    def short(load: float, n: int, p50: float, p90: float, p99: float) -> PointSummary:
        return dataclasses.replace(point(load), requests=n, latency_n={"ttft_ms": n},
                                   ttft_p50_ms=p50, ttft_p90_ms=p90, ttft_p99_ms=p99)

    light = short(1, 40, 30.0, 35.0, 40.0)
    # 40 requests: its p99 (their maximum) is 100× the lightest's, its p90 is not
    assert judge_saturation(short(2, 40, 31.0, 40.0, 4000.0), [light], rule) is None
    reason = judge_saturation(short(2, 40, 300.0, 900.0, 4000.0), [light], rule) or ""
    assert reason.startswith("p90 TTFT 900 ms > 10× the lightest point's 35 ms")
    assert "p99 needs n ≥ 100" in reason
    # the point has 400 requests, the lightest 40: p90, the highest both support
    assert judge_saturation(short(2, 400, 31.0, 40.0, 4000.0), [light], rule) is None
    # a p99 both support decides
    both = judge_saturation(short(2, 400, 31.0, 40.0, 4000.0), [short(1, 100, 30, 35, 40)], rule)
    assert (both or "").startswith("p99 TTFT 4000 ms")
    # 1 request supports no percentile: no growth test
    assert judge_saturation(short(2, 1, 900.0, 900.0, 900.0), [short(1, 1, 3, 3, 3)], rule) is None


def test_parse_loads() -> None:
    assert parse_loads("4, 1,2,2", "--rates", integer=False) == [1, 2, 4]
    with pytest.raises(ValueError, match=r"--users: '1\.5' must be a positive integer"):
        parse_loads("1,1.5", "--users", integer=True)
    with pytest.raises(ValueError, match="--rates: 'x' is not a number"):
        parse_loads("x", "--rates", integer=False)


def base_plan(tmp_path: Path) -> RunPlan:
    return RunPlan(host="http://127.0.0.1:9", api="openai-chat", workloads=[], classes=[],
                   users=8, rate=None, duration_s=20, telemetry="none", slo={}, name="t",
                   workers=0, results_dir=tmp_path, seed=1)


def test_auto_sweep_on_synthetic_runs_finds_the_capacity(tmp_path: Path) -> None:
    plan = SweepPlan(base=base_plan(tmp_path), mode="rate",
                     search=AutoSearch("rate", start=1, factor=2, max_load=64, dense=3))
    result = run_sweep(plan, runner=synthetic_runner)
    index = read_index(result.sweep_dir)
    loads = [p.load for p in index["points"]]
    assert loads[:5] == [1, 2, 4, 8, 16]  # p99 TTFT at 16 req/s is ~100× the lightest
    assert index["status"] == "completed"
    sat = index["saturation"]
    assert sat["found"] and sat["first_saturated_load"] <= 16
    assert 4 <= sat["last_unsaturated_load"] < 10  # the fake saturates at 10 req/s
    for p in index["points"]:
        assert (result.sweep_dir / p.run_dir / "requests.parquet").is_file()
    raw = json.loads((result.sweep_dir / "index.json").read_text())
    assert raw["schema"] == "zerohop.planning.sweep" and raw["mode"] == "rate"


def test_explicit_sweep_runs_every_point(tmp_path: Path) -> None:
    plan = SweepPlan(base=base_plan(tmp_path), mode="users", loads=[1, 2, 4])
    result = run_sweep(plan, runner=synthetic_runner)
    assert [p.load for p in result.points] == [1, 2, 4]
    assert {p.phase for p in result.points} == {"explicit"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rates", "1,2", "--auto", "rate"], "exactly one of --rates, --users or --auto"),
        (["--auto", "rate", "--factor", "1"], "--factor must be > 1"),
        (["--rates", "1,-2"], "--rates: '-2' must be > 0"),
        (["--rates", "1", "--duration", "soon"], "--duration"),
        (["--rates", "1", "--host", "ftp://x"], "--host"),
    ],
)
def test_bad_flags_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["sweep", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_workload_files_select_their_own_classes() -> None:
    from typing import get_args

    from zerohop.planning.nightly import ClassName
    from zerohop.runner.plan import CLASS_NAMES, classes_for
    from zerohop.workloads.inputs import load_workloads
    from zerohop.workloads.kind_registry import workload_kinds

    repo = Path(__file__).resolve().parents[2]
    specs = load_workloads([str(repo / "workloads" / "short_query_flood.yaml"),
                            str(repo / "workloads" / "long_context.yaml")])
    assert classes_for(specs) == ["ShortQueryFlood", "LongContextSummarisation"]
    assert {k.user_class for k in workload_kinds()} == set(CLASS_NAMES) == set(get_args(ClassName))
