from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.planning.fakes import synthetic_runner, write_fake_run
from zerohop.cli import cli
from zerohop.planning.capacity import (
    CapacityPoint,
    Forecast,
    SloCheck,
    TrafficMix,
    find_knee,
    measure_point,
    measure_points,
    plan_capacity,
)
from zerohop.planning.sweep import SweepPlan, run_sweep
from zerohop.runner.plan import RunPlan

pytestmark = pytest.mark.unit


def cp(load: float, ttft_p99: float, *, goodput: float | None = None, ttft_p50: float = 0,
       threshold: float = 500.0, out_tps: float = 1000.0) -> CapacityPoint:
    return CapacityPoint(
        load=load, run_dir="x", offered_rps=load, achieved_rps=load,
        goodput_rps=load if goodput is None else goodput, output_tokens_per_s=out_tps,
        mean_output_tokens=100.0, error_pct=0.0, ttft_p50_ms=ttft_p50 or ttft_p99 / 3,
        ttft_p99_ms=ttft_p99, tpot_p50_ms=10, tpot_p99_ms=12,
        slos=[SloCheck("ttft_p99_ms", threshold, ttft_p99, ttft_p99 <= threshold)],
        workload_shares={"chat": 1.0},
    )


def test_plan_picks_the_best_passing_point_and_sizes_the_fleet() -> None:
    points = [cp(1, 100), cp(2, 200), cp(4, 400), cp(8, 1400)]
    plan = plan_capacity(points, {"ttft_p99_ms": 500}, Forecast(peak_qps=100, headroom=0.2,
                                                               gpu_cost_per_hour=4.0))
    assert plan.operating_point is not None and plan.operating_point.load == 4
    assert plan.max_goodput_rps == 4
    assert plan.replicas == math.ceil(100 * 1.2 / 4)  # 30
    # threshold 500 crossed 10 % of the way from 400 (load 4) to 1400 (load 8)
    assert plan.slo_limited_load_estimate == pytest.approx(4.4)
    assert plan.slo_limited_by == "ttft_p99_ms"
    # 4 $/h for 1000 tok/s = 3.6 M tok/h → 1.111 $ per million
    assert plan.cost_per_million_output_tokens == pytest.approx(4.0 / 3.6)
    assert json.dumps(plan.to_json())  # serialisable, NaN-free


def test_a_layers_knee_is_a_limit_beside_the_replicas() -> None:
    """A router whose instance carries 30 req/s feeds 7.5 replicas of 4 req/s goodput:
    the 120 req/s peak (100 + 20 %) needs 4 instances of it beside 30 replicas; a proxy
    slower than one replica is the bottleneck before the first replica fills."""
    points = [cp(1, 100), cp(2, 200), cp(4, 400), cp(8, 1400)]
    forecast = Forecast(peak_qps=100, headroom=0.2, layer_knees={"router": 30.0, "proxy": 3.0})
    plan = plan_capacity(points, {"ttft_p99_ms": 500}, forecast)
    router, proxy = plan.layers
    assert (router.name, router.replicas_per_instance, router.instances) == ("router", 7.5, 4)
    assert "past 7 replicas per instance" in router.describe()
    assert proxy.replicas_per_instance == pytest.approx(0.75) and proxy.instances == 40
    assert "before the first replica is full" in proxy.describe()
    without_traffic = plan_capacity(points, {"ttft_p99_ms": 500},
                                    Forecast(layer_knees={"router": 30.0}))
    assert without_traffic.layers[0].instances is None
    assert "instances" not in without_traffic.layers[0].describe()
    assert json.loads(json.dumps(plan.to_json()))["layers"][0]["knee_rps"] == 30.0


def test_plan_without_a_passing_point_says_so() -> None:
    plan = plan_capacity([cp(1, 900), cp(2, 1200)], {"ttft_p99_ms": 500}, Forecast(peak_qps=10))
    assert plan.operating_point is None and plan.replicas is None
    assert any("no measured point" in n for n in plan.notes)


def test_plan_notes_when_even_the_top_load_passes() -> None:
    plan = plan_capacity([cp(1, 100), cp(2, 120)], {"ttft_p99_ms": 500}, Forecast())
    assert any("true limit is higher" in n for n in plan.notes)


def test_knee_is_where_latency_bends() -> None:
    points = [cp(x, 0, ttft_p50=y) for x, y in [(1, 30), (2, 32), (4, 35), (6, 45), (8, 400)]]
    knee = find_knee(points)
    assert knee is not None and knee.load == 6
    flat_then_linear = [cp(x, 0, ttft_p50=10 * x) for x in (1, 2, 3, 4)]
    assert find_knee(flat_then_linear) is None  # a straight line has no knee


def test_mix_validation_and_notes() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        TrafficMix(workloads={"a": 0.5, "b": 0.4})
    mix = TrafficMix(workloads={"chat": 0.5, "rag": 0.5})
    plan = plan_capacity([cp(1, 100), cp(2, 900)], {"ttft_p99_ms": 500}, Forecast(mix=mix))
    text = " ".join(plan.notes)
    assert "rag" in text and "different mix" in text


def sweep_dir(tmp_path: Path) -> Path:
    base = RunPlan(host="http://127.0.0.1:9", api="openai-chat", workloads=[], classes=[],
                   users=8, rate=None, duration_s=20, telemetry="none", slo={}, name="t",
                   workers=0, results_dir=tmp_path, seed=1)
    return run_sweep(SweepPlan(base=base, mode="rate", loads=[1, 2, 4, 6, 8, 9.5]),
                     runner=synthetic_runner).sweep_dir


def test_measured_points_rejudge_slos_on_the_records(tmp_path: Path) -> None:
    mode, points = measure_points(sweep_dir(tmp_path), {"ttft_p99_ms": 100.0})
    assert mode == "rate"
    met = {p.load: p.slos[0].met for p in points}
    # fake TTFT = 30/(1-load/10) ms × lognormal(0.1): p99 ≈ 1.26× that
    assert met[1] and met[2] and met[4]
    assert not met[8] and not met[9.5]
    assert all(p.goodput_rps <= p.achieved_rps + 1e-9 for p in points)


def test_capacity_command_writes_page_and_json(tmp_path: Path) -> None:
    folder = sweep_dir(tmp_path)
    result = CliRunner().invoke(cli, ["capacity", str(folder), "--slo", "ttft_p99_ms=100",
                                      "--traffic", "50", "--gpu-cost-per-hour", "2.5"])
    assert result.exit_code == 0, result.output
    assert "SLO-limited load ≈" in result.output
    data = json.loads((folder / "capacity.json").read_text())
    op = data["operating_point"]["load"]
    assert op in (4, 6)
    assert data["replicas"] == math.ceil(50 * 1.2 / data["max_goodput_rps"])
    html = (folder / "capacity.html").read_text()
    assert "chart-capacity-ttft" in html and "operating point" in html
    assert "SLO-limited load (interpolated estimate)" in html
    result = CliRunner().invoke(cli, ["capacity", str(folder), "--slo", "ttft_p99_ms=100",
                                      "--traffic", "50", "--layer", "vllm-router=1500"])
    assert result.exit_code == 0, result.output
    assert "layer vllm-router: knee 1500 req/s per instance" in result.output
    assert "instances for the peak with headroom: 1" in result.output
    assert "layer vllm-router" in (folder / "capacity.html").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slo", "ttft_p99=5"], "--slo: 'ttft_p99' is not like"),
        (["--slo", "ttft_p99_ms=5", "--traffic", "-1"], "--traffic must be > 0"),
        (["--slo", "ttft_p99_ms=5", "--gpus-per-replica", "0"], "--gpus-per-replica"),
        (["--slo", "ttft_p99_ms=5", "--layer", "router"], "--layer 'router': expected"),
        (["--slo", "ttft_p99_ms=5", "--layer", "router=-3"], "with a rate > 0"),
        (["--slo", "ttft_p99_ms=5", "--layer", "r=1", "--layer", "r=2"], "given twice"),
    ],
)
def test_capacity_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["capacity", str(sweep_dir(tmp_path)), *args])
    assert result.exit_code == 2 and message in result.output


def test_capacity_bad_mix_and_missing_index(tmp_path: Path) -> None:
    mix = tmp_path / "mix.yaml"
    mix.write_text("workloads: {chat: 1.0}\nextra: 1\n")
    result = CliRunner().invoke(cli, ["capacity", str(sweep_dir(tmp_path)), "--slo",
                                      "ttft_p99_ms=5", "--mix", str(mix)])
    assert result.exit_code == 2 and "extra" in result.output
    result = CliRunner().invoke(cli, ["capacity", str(tmp_path), "--slo", "ttft_p99_ms=5"])
    assert result.exit_code == 2 and "no sweep index" in result.output


def test_a_layer_sweep_point_is_judged_on_its_direct_arm_at_every_arms_throughput(
        tmp_path: Path) -> None:
    """A layer sweep's point: the SLO and latencies are the engines' own (the direct
    arm: the hop's cost is the knee's business), the throughput every arm's (the engines
    served them all), and the index's offered rate (the direct share) scaled back."""
    import pyarrow.parquet as pq

    # 120 direct requests: enough for the p99 below (core.metrics.needed_n)
    run_dir = write_fake_run(tmp_path, "layered", rate_rps=9.0, ttft_ms=30.0, duration_s=40.0)
    table = pq.read_table(run_dir / "requests.parquet").to_pandas()
    arms = np.array(["direct", "control", "router"])[np.arange(len(table)) % 3]
    table["arm"] = arms
    table.loc[arms == "router", "ttft_ms"] += 900.0  # a hop far past the SLO
    table.to_parquet(run_dir / "requests.parquet")
    point = measure_point(run_dir, 9.0, offered_rps=3.0, slo={"ttft_p99_ms": 500.0})
    assert point.offered_rps == pytest.approx(9.0, rel=0.02)  # 3 req/s was direct's third
    assert point.achieved_rps == pytest.approx(9.0, rel=0.1)
    assert point.goodput_rps == pytest.approx(point.achieved_rps)  # direct: all good
    assert point.ttft_p99_ms < 100.0  # the router's +900 ms is not the engines'
    assert all(check.met for check in point.slos)


def test_the_capacity_axis_and_operating_point_are_the_measured_offered_rate() -> None:
    """A sweep whose points offered more than they asked for (a workload that kept its
    own pace: `rate 2` offered 10.9 req/s) is drawn and named by what was offered."""
    from dataclasses import replace

    from zerohop.planning.capacity_cli import summary_lines
    from zerohop.planning.capacity_page import capacity_page

    offered = {2: 10.9, 4: 12.8, 8: 17.1}
    points = [replace(cp(load, ttft), offered_rps=offered[load], achieved_rps=offered[load],
                      goodput_rps=offered[load])
              for load, ttft in ((2, 100), (4, 300), (8, 1400))]
    plan = plan_capacity(points, {"ttft_p99_ms": 500}, Forecast(peak_qps=100))
    page = capacity_page(plan, "now")
    for chart in page.charts:
        assert list(chart.x) == [10.9, 12.8, 17.1], chart.chart_id
        assert chart.x_label == "req/s offered"
    line = next(line for line in summary_lines(plan) if line.startswith("operating point"))
    assert line.startswith("operating point: 12.8 req/s offered (the sweep's point 4 req/s)")


def plain_ttft(run_dir: Path) -> np.ndarray:
    """A point's TTFTs read straight from its records (the ok requests')."""
    import pyarrow.parquet as pq

    table = pq.read_table(run_dir / "requests.parquet").to_pandas()
    return table.loc[table["outcome"] == "ok", "ttft_ms"].dropna().to_numpy()


def test_the_capacity_page_dashes_a_p99_its_point_has_too_few_requests_for(
        tmp_path: Path) -> None:
    """Each row's n and TTFT p50/p99 recomputed from the point's records: a dash where
    n is below what the percentile needs (p50: 2, p99: 100), in the table and the curve."""
    from zerohop.planning.capacity_page import capacity_page
    from zerohop.report import formatting as fmt

    folder = sweep_dir(tmp_path)
    mode, points = measure_points(folder, {"ttft_p99_ms": 100.0})
    plan = plan_capacity(points, {"ttft_p99_ms": 100.0}, Forecast(), mode)
    page = capacity_page(plan, "now")
    columns = page.context["columns"]
    n_at, p50_at, p99_at = (columns.index(c) for c in ("n (TTFT)", "TTFT p50", "TTFT p99"))
    dashed = []
    for row, point in zip(page.context["rows"], plan.points, strict=True):
        ttft = plain_ttft(Path(point.run_dir))
        assert row["cells"][n_at] == f"{ttft.size:,}"
        assert row["cells"][p50_at] == fmt.ms(float(np.percentile(ttft, 50)))
        p99 = fmt.ms(float(np.percentile(ttft, 99))) if ttft.size >= 100 else fmt.DASH
        assert row["cells"][p99_at] == p99
        dashed.append(p99 == fmt.DASH)
    assert dashed == [True, True, True, False, False, False]  # 20, 40, 80 requests: none
    curve = next(c for c in page.charts if c.chart_id == "chart-capacity-ttft")
    drawn = next(s for s in curve.series if s.label == "TTFT p99").values
    assert [math.isnan(v) for v in drawn] == dashed
    assert "p99 n ≥ 100" in page.context["notes"][-1]


def test_a_point_its_run_found_saturated_is_no_operating_point(tmp_path: Path) -> None:
    """The run's saturation verdict (its summary.json) takes a point out of the
    candidates, and the plan, its page and its console say which and by which signal."""
    from zerohop.core.layout import SUMMARY_FILE
    from zerohop.planning.capacity_cli import summary_lines
    from zerohop.planning.capacity_page import capacity_page

    folder = sweep_dir(tmp_path)
    slo = {"ttft_p99_ms": 100.0}
    _, before = measure_points(folder, slo)
    best = plan_capacity(before, slo, Forecast()).operating_point
    assert best is not None
    verdict = {"saturated": True, "signal": "first_token_wait", "since_s": 7.0}
    (Path(best.run_dir) / SUMMARY_FILE).write_text(json.dumps({"saturation": verdict}))
    mode, after = measure_points(folder, slo)
    plan = plan_capacity(after, slo, Forecast(), mode)
    assert plan.operating_point is not None and plan.operating_point.load != best.load
    assert plan.operating_point.load < best.load  # the next best candidate below it
    said = f"{best.load:g} (the first-token wait since 7 s)"
    assert any(said in note for note in plan.notes)
    assert any(said in line for line in summary_lines(plan))
    rows = capacity_page(plan, "now").context["rows"]
    verdicts = [row["cells"][-1] for row in rows]
    assert verdicts == ["saturated: the first-token wait since 7 s" if p.load == best.load
                        else "kept up" for p in plan.points]
