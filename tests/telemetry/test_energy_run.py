"""Energy per token from a real `zerohop run` against the embedded target, its /metrics
scraped: the energy counter's figure agrees with the modelled power gauge integrated
over the same samples, to within what a trapezoid over those scrape intervals can miss;
and the report's Energy section shows it, marked modelled."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.main_job.test_run_command import zerohop
from zerohop.analysis.measured_window import measured_window
from zerohop.analysis.server.energy import summarise_energy
from zerohop.report import formatting as fmt
from zerohop.report.build import build_report
from zerohop.sim.cost_model.gpu_activity import GpuActivity
from zerohop.sim.cost_model.profiles import load_profiles
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.integration

SCRAPE_S = 0.25
WORKLOAD = ("kind: short_query_flood\nname: flood\ninput_tokens: 64\nmax_tokens: 32\n"
            "load: {kind: closed, users: 4}\n")


def test_energy_per_token_on_the_embedded_target(tmp_path: Path) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(WORKLOAD)
    res = zerohop("run", "--workload", str(workload), "--duration", "6s", "--telemetry",
                  f"prom:interval={SCRAPE_S}", "--microbench", "off", "--no-report",
                  "--results-dir", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = (tmp_path / "r").iterdir()
    run = load_run(run_dir)
    window = measured_window(run)
    summary = summarise_energy(run, window)
    assert summary is not None and summary.method == "energy counter"
    assert summary.modelled  # the embedded target's GPU model, scraped from its /metrics
    (gpu,) = summary.gpus
    assert gpu.gpu == "0" and gpu.resets == 0
    assert summary.output_tokens > 0 and summary.j_per_output_token > 0
    assert summary.j_per_ok_request > summary.j_per_output_token

    telemetry = run.telemetry
    power = telemetry[telemetry["metric"].astype(str) == "gpu_power_w"]
    model_name = json.loads(str(power["labels"].iloc[0]))["modelName"]
    (profile,) = [g for g in load_profiles().gpus.values() if g.display_name == model_name]
    # the model's own bounds: idle power when nothing runs, TDP when compute-bound
    assert profile.idle_w <= gpu.mean_power_w <= profile.tdp_w

    # The same window from the power gauge alone, trapezoid over the same scrapes.
    # Modelled power is idle + swing·(0.55·B + 0.45·B·S) with B and S relaxing at
    # most 1/τ per second, so it moves at most L = 1.45·swing/τ W/s; a trapezoid over
    # h seconds then misses at most L·h²/4, an interpolated window edge L·h²/2 more,
    # and a gauge up to 1 ms stale (GpuActivity.sample) L·1 ms·h.
    gauge_only = replace(run, telemetry=telemetry[
        telemetry["metric"].astype(str) != "gpu_energy_j"].reset_index(drop=True))
    integrated = summarise_energy(gauge_only, window)
    assert integrated is not None and integrated.method == "integrated power samples"
    slope = 1.45 * (profile.tdp_w - profile.idle_w) / GpuActivity.TAU_S
    stamps = np.sort(power["ts"].to_numpy(dtype=float))
    start, end = window.start_ts, window.end_ts
    spans = np.diff(stamps)[(stamps[1:] > start) & (stamps[:-1] < end)]
    edges = int(stamps[0] < start) + int(stamps[-1] > end)
    bound = float(np.sum(slope * spans**2 / 4 + slope * 1e-3 * spans)) \
        + edges * slope * float(spans.max()) ** 2 / 2
    assert abs(gpu.energy_j - integrated.gpus[0].energy_j) <= bound
    scale = window.duration_s / gpu.covered_s  # both stretch the covered part alike
    assert summary.j_per_output_token == pytest.approx(
        integrated.mean_power_w * window.duration_s / summary.output_tokens,
        abs=bound * scale / summary.output_tokens)

    # the report's Energy section, from the same analysis
    page = build_report(run_dir).read_text()
    section = page[page.index('<section id="energy">'):]
    section = section[:section.index("</section>")]
    assert f"{fmt.number(summary.j_per_output_token)} J per output token" in section
    assert "from the GPUs&#39; energy counters" in section, section
    # modelled, and said where the figure is, not only in the appendix
    heading = section[:section.index("</h2>")]
    assert "modelled, not measured" in heading, heading
    assert "the embedded target&#39;s GPU model, not a measured GPU" in section, section
    assert 'href="#energy"' in page
