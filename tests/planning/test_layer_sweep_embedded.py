"""A layer sweep end to end: the embedded target behind zerohop's own proxy (a tail
delay on a few requests), `zerohop sweep --compare-layer --layer-url --layer-pid` at two
rates. Each point is one interleaved run whose arms summary is in its folder and in
index.json with the proxy's CPU and RSS by pid; the index holds the knee's verdict and
sweep.html its Layers section. No timing figure is held: the knee itself is whatever
this machine measured."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from zerohop.cli import cli
from zerohop.sim.embedded import start_embedded_target
from zerohop.sim.launcher import start_proxy

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "workloads" / "short_query_flood.yaml"


def test_layer_sweep_records_arms_and_the_layer_process_per_point(tmp_path: Path) -> None:
    engine = start_embedded_target()
    try:
        proxy = start_proxy(engine.url, ["--delay-ms", "20", "--delay-percent", "10"])
        try:
            result = CliRunner().invoke(cli, [
                "sweep", "--host", engine.url, "--rates", "5,20", "--duration", "6s",
                "--workload", str(WORKLOAD), "--only", "ShortQueryFlood",
                "--telemetry", "loadgen", "--compare-layer",
                "--layer-url", f"proxy={proxy.url}", "--layer-pid", f"proxy={proxy.pid}",
                "--results-dir", str(tmp_path)])
        finally:
            proxy.stop()
    finally:
        engine.stop()
    assert result.exit_code == 0, result.output
    (sweep_dir,) = tmp_path.glob("*-sweep-sweep")
    index = json.loads((sweep_dir / "index.json").read_text())
    assert index["layers"]["urls"] == {"proxy": proxy.url}
    assert [p["load"] for p in index["points"]] == [5.0, 20.0]
    for point in index["points"]:
        arms = point["layer"]["arms"]
        assert set(arms["arms"]) == {"direct", "proxy"}
        assert arms["arms"]["direct"]["requests"] == point["requests"]  # the engines' own
        assert {"p50", "p99"} <= set(arms["costs"]["proxy"]["layer_cost_ms"]["ttft_ms"])
        on_disk = json.loads((sweep_dir / point["run_dir"] / "arms.json").read_text())
        assert on_disk == arms
        process = point["layer"]["processes"]["proxy"]
        assert process["pid"] == proxy.pid and process["samples"] >= 2
        # the proxy relayed every request of the point: it used some CPU, and at most
        # what this machine's cores give
        assert 0 < process["cpu_pct_mean"] <= 100 * (os.cpu_count() or 1)
        assert process["rss_bytes_max"] > 0
    knees = index["layer_knee"]["layers"]["proxy"]
    assert set(knees) == {"p50", "p99"}
    for knee in knees.values():
        assert knee["rate"] in (None, 20.0)
        assert knee["text"].startswith(knee["stat"] + ": ")
    page = (sweep_dir / "sweep.html").read_text()
    assert 'id="layers"' in page and "Route distribution per point" in page
    assert "layer proxy: p50" in result.output
