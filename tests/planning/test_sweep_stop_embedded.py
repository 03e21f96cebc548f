"""`--stop-when-saturated` on the embedded target, end to end: one `zerohop sweep
--rates 2,30,60` whose points are ordinary runs with the live stop. The light point
never saturates and runs its whole load; the overloaded one ends early on the live
verdict with its results finished (summary.json says when, by which signal, at what
rate); the sweep stops there, skipping 60, and says the time it saved.

One sweep is shared by the tests (a module fixture): an early stop cannot come sooner
than the detector's 15 s window of evidence, then Locust's 10 s drain, and a point that
never stops must run past that window to mean anything; about a minute in all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from zerohop.cli import cli
from zerohop.core.layout import SATURATION_STOP_KEY, SUMMARY_FILE

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "workloads" / "short_query_flood.yaml"
SMALL_TARGET = "--time-scale 5 --max-num-seqs 4"  # ~6-7 req/s of 16-token answers
DURATION_S = 20.0


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("stop-sweep")
    result = CliRunner().invoke(cli, [
        "sweep", "--rates", "2,30,60", "--duration", f"{DURATION_S:g}s",
        "--stop-when-saturated", "--workload", str(WORKLOAD), "--only", "ShortQueryFlood",
        "--sim-args", SMALL_TARGET, "--telemetry", "loadgen", "--results-dir", str(out)])
    assert result.exit_code == 0, result.output
    (folder,) = out.glob("*-sweep-sweep")
    index = json.loads((folder / "index.json").read_text())
    points = {p["load"]: p for p in index["points"]}
    runs = {load: folder / p["run_dir"] for load, p in points.items()}
    return {"output": result.output, "points": points, "runs": runs,
            "summaries": {load: json.loads((d / SUMMARY_FILE).read_text())
                          for load, d in runs.items()},
            "manifests": {load: json.loads((d / "manifest.json").read_text())
                          for load, d in runs.items()}}


def test_a_run_that_keeps_up_never_stops_early(sweep: dict[str, Any]) -> None:
    block = sweep["summaries"][2]["saturation"]
    assert block["saturated"] is False and block["stopped_early"] is False
    manifest = sweep["manifests"][2]
    assert SATURATION_STOP_KEY not in manifest and manifest["status"] == "completed"
    assert sweep["points"][2]["saturated"] is False
    # it ran its whole load: past the detector's 15 s window, which it never filled
    assert sweep["summaries"][2]["window"]["duration_s"] >= DURATION_S - 2.0


def test_an_overloaded_run_ends_early_with_its_results_finished(sweep: dict[str, Any]) -> None:
    manifest, summary = sweep["manifests"][30], sweep["summaries"][30]
    stop = manifest[SATURATION_STOP_KEY]
    assert manifest["status"] == "completed"
    assert manifest["end_reason"] == "stopped early: saturated"
    block = summary["saturation"]
    assert block["stopped_early"] is True and block["live"] == stop
    assert stop["signal"] == "first_token_wait" and stop["planned_s"] == DURATION_S
    # offered 30 req/s against ~6-7 served: behind within seconds, found a window later
    assert 0 <= stop["since_s"] <= 6 and stop["since_s"] + 14 <= stop["stopped_at_s"]
    assert stop["stopped_at_s"] < DURATION_S
    assert stop["offered_rps"] == pytest.approx(30.0, rel=0.2)
    assert (sweep["runs"][30] / "requests.parquet").is_file()  # the records consolidated
    assert sweep["points"][30]["saturated"] is True
    assert "first-token wait" in sweep["points"][30]["reason"]


def test_the_sweep_stops_at_the_saturated_point_and_says_the_time_saved(
        sweep: dict[str, Any]) -> None:
    assert sorted(sweep["points"]) == [2, 30]  # 60 never ran
    stop = sweep["manifests"][30][SATURATION_STOP_KEY]
    saved = DURATION_S + (stop["planned_s"] - stop["stopped_at_s"])  # 60's load and 30's cut
    assert (f"stopped at the first saturated point (rate 30); skipped 60; {saved:.0f} s of "
            "load saved") in sweep["output"]
