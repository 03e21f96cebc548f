"""The report's Energy section (report/present_energy.py): its figures as printed."""

from __future__ import annotations

import pytest

from zerohop.analysis.server.energy import EnergySummary, GpuEnergy
from zerohop.report.present_energy import energy_section

pytestmark = pytest.mark.unit


def _summary(coverage: float) -> EnergySummary:
    gpus = (GpuEnergy("nvml", "0", 3000.0, 10.0, 0), GpuEnergy("nvml", "1", 1000.0, 10.0, 1))
    return EnergySummary(method="energy counter", gpus=gpus, window_s=10.0,
                         coverage=coverage, energy_j=4000.0, mean_power_w=400.0,
                         output_tokens=8000.0, ok_requests=100.0, j_per_output_token=0.5,
                         j_per_ok_request=40.0, output_tokens_per_j=2.0)


def test_the_section_prints_per_token_per_request_and_each_gpu() -> None:
    section = energy_section(_summary(1.0))
    assert section is not None
    assert (section["j_per_token"], section["j_per_request"], section["tokens_per_j"],
            section["mean_power_w"], section["gpus"]) == ("0.5", "40", "2", "400", 2)
    assert [(r["gpu"], r["energy_j"], r["mean_power_w"], r["resets"])
            for r in section["rows"]] == [("0", "3,000", "300", "0"), ("1", "1,000", "100", "1")]
    assert section["coverage"] is None


def test_a_partly_sampled_window_says_how_much_and_no_energy_leaves_it_out() -> None:
    section = energy_section(_summary(0.6))
    assert section is not None
    assert section["coverage"].startswith("The samples span 60.0 % of the window")
    assert energy_section(None) is None
