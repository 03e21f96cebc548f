"""A layer sweep without servers: its flags (the run's own --compare-layer checks, and
--layer-pid), its page section built from synthetic points (escaped), and the measured
knee that `zerohop capacity` reads from its index as a layer limit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.planning.fakes import synthetic_runner
from tests.planning.layer_points import layer_points
from tests.synthetic_runs import HOSTILE
from zerohop.cli import cli
from zerohop.planning.capacity import Forecast, layer_limits, measured_knees
from zerohop.planning.layer_knee_page import layers_context
from zerohop.planning.layer_process import parse_layer_pids
from zerohop.planning.sweep import (
    INDEX_FILE,
    SweepPlan,
    layer_knee_of,
    run_sweep,
)
from zerohop.planning.sweep_cli import plan_from_flags
from zerohop.planning.sweep_page import SWEEP_PAGE, write_sweep_page
from zerohop.runner.plan import RunPlan

pytestmark = pytest.mark.unit

HOST = "http://127.0.0.1:9"
LAYER = "http://127.0.0.1:10"


@pytest.mark.parametrize(("args", "message"), [
    (["--compare-layer"], "give --layer-url NAME=URL"),
    (["--compare-layer", "--layer-url", f"r={LAYER}"],
     "--layer-url is a gateway in front of --host: give both"),
    (["--host", HOST, "--layer-url", f"r={LAYER}"], "--layer-url is --compare-layer's"),
    (["--host", HOST, "--control"], "--control is --compare-layer's"),
    (["--host", HOST, "--compare-layer", "--layer-url", "r=ftp://x"], "is not an http:// URL"),
    (["--host", HOST, "--compare-layer", "--layer-url", f"r={LAYER}", "--layer-pid", "r=abc"],
     "--layer-pid: 'r=abc' is not NAME=PID"),
    (["--host", HOST, "--compare-layer", "--layer-url", f"r={LAYER}", "--layer-pid", "12"],
     "is not NAME=PID"),
    (["--host", HOST, "--compare-layer", "--layer-url", f"r={LAYER}",
      "--layer-pid", f"other={os.getpid()}"], "'other' is not a --layer-url arm (r)"),
    (["--host", HOST, "--layer-pid", f"r={os.getpid()}"], "--layer-pid is --compare-layer's"),
])
def test_bad_layer_flags_exit_2_in_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["sweep", "--rates", "5,20", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zerohop: error: "), result.output
    assert message in lines[0]


def test_layer_flags_make_a_layer_plan() -> None:
    kw = {"rates": "5,20", "users_list": None, "auto": None, "duration": "6s",
          "max_points": 12, "host": HOST, "workloads": (), "classes": (), "api": "openai-chat",
          "telemetry": "none", "name": "s", "results_dir": Path("r"), "seed": 1,
          "sim_args": "", "model": "", "report": False, "start": 1.0, "factor": 2.0,
          "max_load": 8.0, "dense": 1, "compare_layer": True,
          "layer_urls": (f"router={LAYER}",), "control": True,
          "layer_pids": (f"router={os.getpid()}",)}
    plan = plan_from_flags(kw)
    assert plan.layers is not None and plan.layers.layer_urls == {"router": LAYER}
    assert plan.layers.control
    assert plan.layer_pids == {"router": os.getpid()}
    assert plan_from_flags({**kw, "compare_layer": False, "layer_urls": (), "control": False,
                            "layer_pids": ()}).layers is None


def test_a_missing_process_is_refused() -> None:
    with pytest.raises(ValueError, match="no process"):
        parse_layer_pids(["r=999999999"], ["r"])
    with pytest.raises(ValueError, match="given twice"):
        parse_layer_pids([f"r={os.getpid()}", f"r={os.getpid()}"], ["r"])


def test_the_page_section_shows_the_knee_cpu_saturation_and_routes_escaped(
        tmp_path: Path) -> None:
    points = layer_points(HOSTILE, replicas=(HOSTILE, "r1"))
    knee = layer_knee_of(points)
    context, charts = layers_context(points, knee, "req/s")
    layer = context["layers"][0]
    assert [k["knee"] for k in layer["knees"]] == \
        ["40 req/s offered (20 req/s through the layer)"] * 2  # half the requests direct
    assert layer["knees"][0]["cpu"] == "80.0 %"  # 2 × 40 req/s, the synthetic CPU
    assert [r["engines"] for r in layer["rows"]] == ["no", "no", "no", "yes"]
    assert len(charts) == 1 and [s.label for s in charts[0].series][-1] == "p99 knee"
    page = write_sweep_page(tmp_path, "s", "rate", points, {"found": False},
                            finished=True, layer_knee=knee)
    html = page.read_text()
    assert 'id="layers"' in html
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "50.0 MiB" in html


def test_no_knee_within_the_rates_tried_is_said(tmp_path: Path) -> None:
    points = layer_points(knee_at=1000.0)
    knee = layer_knee_of(points)
    assert knee["layers"]["router"]["p50"]["rate"] is None
    context, _ = layers_context(points, knee, "req/s")
    assert context["layers"][0]["knees"][0]["knee"] == "no knee within the rates tried"
    assert measured_knees(knee) == {}


def test_measured_knee_is_a_layer_limit_with_its_rate_and_cpu() -> None:
    knees = measured_knees(layer_knee_of(layer_points(knee_at=40.0)))
    router = knees["router"]
    # the offered rate counts both arms; the router carried its half
    assert (router.offered_rps, router.knee_rps) == (40.0, 20.0)
    assert (router.cpu_pct, router.engines_saturated) == (80.0, False)
    limit, = layer_limits(Forecast(peak_qps=100, layer_knees={"router": router.knee_rps},
                                   measured_layers=knees), 10.0)
    assert limit.measured == router and limit.instances == 6
    assert ("measured: p50 cost grew at 40 req/s offered, 20 through the layer, layer CPU "
            "80.0 % of a core there") in limit.describe()


def sweep_with_knee(tmp_path: Path) -> Path:
    base = RunPlan(host=HOST, api="openai-chat", workloads=[], classes=[], users=8, rate=None,
                   duration_s=20, telemetry="none", slo={}, name="t", workers=0,
                   results_dir=tmp_path, seed=1)
    folder = run_sweep(SweepPlan(base=base, mode="rate", loads=[1, 2, 4]),
                       runner=synthetic_runner).sweep_dir
    index = json.loads((folder / INDEX_FILE).read_text())
    index["layer_knee"] = layer_knee_of(layer_points(knee_at=20.0))
    (folder / INDEX_FILE).write_text(json.dumps(index))
    return folder


def test_capacity_reads_the_measured_knee_and_a_manual_layer_overrides_it(
        tmp_path: Path) -> None:
    folder = sweep_with_knee(tmp_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["capacity", str(folder), "--slo", "ttft_p99_ms=500",
                                 "--traffic", "50"])
    assert result.exit_code == 0, result.output
    assert "layer router: knee 10 req/s per instance (measured: p50 cost grew at 20 " \
        "req/s offered, 10 through the layer, layer CPU 40.0 % of a core there)" in result.output
    plan = json.loads((folder / "capacity.json").read_text())
    assert plan["layers"][0]["measured"]["knee_rps"] == 10.0
    manual = runner.invoke(cli, ["capacity", str(folder), "--slo", "ttft_p99_ms=500",
                                 "--layer", "router=70"])
    assert manual.exit_code == 0, manual.output
    assert "layer router: knee 70 req/s per instance" in manual.output
    assert "measured" not in manual.output
    assert json.loads((folder / "capacity.json").read_text())["layers"][0]["measured"] is None


def test_a_plain_sweep_has_no_layers_section(tmp_path: Path) -> None:
    folder = sweep_with_knee(tmp_path)
    assert 'id="layers"' not in (folder / SWEEP_PAGE).read_text()
