"""Energy over the measured window: counter deltas per GPU (a driver reload's restart
handled), the power gauge integrated only when there is no counter, nothing without
either; the figures are worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from zerohop.analysis.measured_window import MeasuredWindow
from zerohop.analysis.run_data import RunData, frame_from_rows
from zerohop.analysis.server.energy import summarise_energy

pytestmark = pytest.mark.unit

WINDOW = MeasuredWindow(100.0, 10.0, "manifest")
STAMPS = [99.0, 101.0, 103.0, 105.0, 107.0, 109.0, 111.0]


def _requests() -> list[dict[str, Any]]:
    """Ten ok requests of 40 tokens ending inside the window, an error inside it and an
    ok one ending after it: 400 tokens and 10 requests count."""
    rows = [{"workload": "chat", "outcome": "ok", "sent_ts": 100.0 + i, "scheduled_ts":
             100.0 + i, "end_ts": 100.5 + i, "output_tokens": 40} for i in range(10)]
    rows.append({**rows[0], "outcome": "error", "output_tokens": 7})
    rows.append({**rows[0], "end_ts": 112.0, "output_tokens": 1000})
    return rows


def _run(series: list[tuple[str, str, dict[str, str], list[float], list[float]]]) -> RunData:
    """Telemetry from (source, metric, labels, ts, values) series."""
    rows = [(t, source, metric, json.dumps(labels), v)
            for source, metric, labels, ts, values in series
            for t, v in zip(ts, values, strict=True)]
    telemetry = pd.DataFrame({
        "ts": [r[0] for r in rows], "source": pd.Categorical([r[1] for r in rows]),
        "metric": pd.Categorical([r[2] for r in rows]),
        "labels": pd.Categorical([r[3] for r in rows]), "value": [r[4] for r in rows]})
    frame, itl = frame_from_rows(_requests())
    return RunData(Path("."), {"load": {"duration_s": 10.0}}, frame, itl, telemetry, None,
                   "jsonl")


def test_counter_deltas_per_gpu_with_a_driver_reload() -> None:
    # gpu 0: 150 W, 300 J every 2 s; read at the window's edges by interpolation
    gpu0 = [5000.0 + 150.0 * (t - 99.0) for t in STAMPS]
    # gpu 1: 200 W, but the driver reloads before 105 s: the counter restarts at 0
    gpu1 = [8000.0, 8400.0, 8800.0, 100.0, 500.0, 900.0, 1300.0]
    run = _run([
        ("nvml", "gpu_energy_j", {"gpu": "0"}, STAMPS, gpu0),
        ("nvml", "gpu_energy_j", {"gpu": "1"}, STAMPS, gpu1),
        ("nvml", "gpu_power_w", {"gpu": "0"}, STAMPS, [999.0] * 7),  # the counter wins
        ("prom", "gpu_energy_j", {}, STAMPS, [0.0, 1e9, 2e9, 3e9, 4e9, 5e9, 6e9]),  # no gpu
    ])
    summary = summarise_energy(run, WINDOW)
    assert summary is not None and summary.method == "energy counter"
    gpu_0, gpu_1 = summary.gpus
    assert (gpu_0.gpu, gpu_0.energy_j, gpu_0.resets) == ("0", pytest.approx(1500.0), 0)
    # cumulative 0, 400, 800, 900 (the restart counts its new value), 1300, 1700, 2100:
    # at 110 s 1900, at 100 s 200
    assert (gpu_1.gpu, gpu_1.energy_j, gpu_1.resets) == ("1", pytest.approx(1700.0), 1)
    assert gpu_1.mean_power_w == pytest.approx(170.0)
    assert summary.coverage == 1.0
    assert summary.mean_power_w == pytest.approx(320.0)
    assert summary.energy_j == pytest.approx(3200.0)
    assert (summary.output_tokens, summary.ok_requests) == (400.0, 10.0)
    assert summary.j_per_output_token == pytest.approx(8.0)
    assert summary.j_per_ok_request == pytest.approx(320.0)
    assert summary.output_tokens_per_j == pytest.approx(0.125)
    assert "counter" in summary.note


def test_without_a_counter_the_power_gauge_is_integrated_and_said_so() -> None:
    stamps = [100.0, 102.0, 104.0, 106.0, 108.0, 110.0]
    run = _run([("prom", "gpu_power_w", {"gpu": "3"}, stamps,
                 [100.0, 200.0, 100.0, 200.0, 100.0, 200.0])])
    summary = summarise_energy(run, WINDOW)
    assert summary is not None and summary.method == "integrated power samples"
    assert "integrated from power samples" in summary.note
    assert summary.gpus[0].gpu == "3"
    assert summary.energy_j == pytest.approx(1500.0)  # five trapezoids of 2 s × 150 W
    assert summary.j_per_output_token == pytest.approx(3.75)


def test_a_partly_covered_window_is_its_measured_mean_power_times_its_length() -> None:
    stamps = [104.0, 106.0, 108.0, 110.0, 112.0]
    run = _run([("nvml", "gpu_energy_j", {"gpu": "0"}, stamps,
                 [1000.0 + 100.0 * (t - 104.0) for t in stamps])])
    summary = summarise_energy(run, WINDOW)
    assert summary is not None
    assert summary.gpus[0].covered_s == pytest.approx(6.0)
    assert summary.gpus[0].energy_j == pytest.approx(600.0)
    assert summary.coverage == pytest.approx(0.6)
    assert summary.energy_j == pytest.approx(1000.0)  # 100 W × the 10 s window


def test_no_energy_without_a_per_gpu_series_or_a_window() -> None:
    assert summarise_energy(_run([]), WINDOW) is None
    fleet_mean = _run([("virtual-clock", "gpu_power_w", {"replicas": "all"}, STAMPS,
                        [300.0] * 7)])
    assert summarise_energy(fleet_mean, WINDOW) is None
    one_sample = _run([("nvml", "gpu_energy_j", {"gpu": "0"}, [105.0], [1.0])])
    assert summarise_energy(one_sample, WINDOW) is None
    counted = _run([("nvml", "gpu_energy_j", {"gpu": "0"}, STAMPS, STAMPS)])
    assert summarise_energy(counted, MeasuredWindow(math.nan, math.nan, "none")) is None
    later = summarise_energy(counted, MeasuredWindow(200.0, 10.0, "manifest"))
    assert later is None  # the samples end before the window opens
    # records without timestamps: every sample counts, its mean power over the window
    undated = summarise_energy(counted, MeasuredWindow(math.nan, 10.0, "manifest"))
    assert undated is not None and undated.gpus[0].energy_j == pytest.approx(12.0)
    assert undated.energy_j == pytest.approx(10.0)  # 1 W × 10 s


@pytest.mark.parametrize(("manifest", "source", "modelled"), [
    ({"target": {"kind": "embedded"}}, "prom", True),        # the sim's own /metrics
    ({"target": {"kind": "embedded"}}, "nvml:host", False),  # a real GPU beside it
    ({"target": {"kind": "external"}}, "prom", False),       # a real server's exporter
    ({"simulation": {"clock": "virtual"}}, "prom", True),    # zerohop simulate
])
def test_energy_from_a_gpu_model_is_marked_modelled(manifest: dict[str, Any], source: str,
                                                    modelled: bool) -> None:
    run = _run([(source, "gpu_energy_j", {"gpu": "0"}, STAMPS,
                 [1000.0 + 300.0 * (t - 99.0) for t in STAMPS])])
    run.manifest.update(manifest)
    energy = summarise_energy(run, WINDOW)
    assert energy is not None and energy.modelled is modelled
    assert ("modelled, not measured" in energy.note) is modelled
    assert energy.j_per_output_token == pytest.approx(3000.0 / 400)


def test_pooling_requests_cost_joules_per_item() -> None:
    """Embeddings and rerank carry no output tokens: their cost is per text or pair."""
    run = _run([("nvml:host", "gpu_energy_j", {"gpu": "0"}, STAMPS,
                 [1000.0 + 300.0 * (t - 99.0) for t in STAMPS])])
    rows = [{**row, "output_tokens": 0, "items": 8} for row in _requests()]
    run.requests, run.itl = frame_from_rows(rows)
    energy = summarise_energy(run, WINDOW)
    assert energy is not None and energy.items == 80  # ten ok requests in the window
    assert energy.j_per_item == pytest.approx(3000.0 / 80)
    assert math.isnan(energy.j_per_output_token)


@pytest.mark.parametrize("modelled", [True, False])
def test_the_console_says_when_energy_is_modelled(modelled: bool) -> None:
    from zerohop.runner.console_summary import energy_line

    run = _run([("prom" if modelled else "nvml:host", "gpu_energy_j", {"gpu": "0"}, STAMPS,
                 [1000.0 + 300.0 * (t - 99.0) for t in STAMPS])])
    run.manifest["target"] = {"kind": "embedded"}
    energy = summarise_energy(run, WINDOW)
    line = energy_line(energy)
    assert line is not None and line.startswith("energy: 7.5 J per output token, 300 W mean")
    assert line.endswith("(modelled by the embedded target's GPU model, not measured)") \
        is modelled
