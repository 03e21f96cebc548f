"""The energy check's arithmetic and its JSON, on a scripted meter and clock (the real
GPU run is tests/microbench/test_energy_on_gpu.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerohop.microbench import energy_check
from zerohop.microbench.energy_check import EnergyCheck, EnergyUnavailable, measure

pytestmark = pytest.mark.unit


class ScriptedGpu:
    """Each busy call takes 0.5 s and 150 J (300 W); `counter` can be broken."""

    def __init__(self, counter: list[float | None] | None = None) -> None:
        self.now = 0.0
        self.energy = 10_000.0
        self.syncs = 0
        self.readings = counter

    def busy_once(self) -> None:
        self.now += 0.5
        self.energy += 150.0

    def sync(self) -> None:
        self.syncs += 1

    def total_energy_j(self) -> float | None:
        return self.energy if self.readings is None else self.readings.pop(0)

    def power_w(self) -> float | None:
        return 290.0


def test_joules_and_mean_watts_over_the_loop() -> None:
    gpu = ScriptedGpu()
    check = measure(gpu, gpu.busy_once, gpu.sync, seconds=2.0, clock=lambda: gpu.now)
    assert (check.iterations, check.seconds, check.energy_j) == (4, 2.0, 600.0)
    assert check.mean_w == 300.0
    assert check.power_w_before == check.power_w_after == 290.0
    assert gpu.syncs == 5  # before the first read and after every busy call


@pytest.mark.parametrize("readings", [[None], [5000.0, 100.0], [5000.0, None]])
def test_a_missing_or_restarted_counter_is_an_error(readings: list[float | None]) -> None:
    gpu = ScriptedGpu(readings)
    with pytest.raises(EnergyUnavailable):
        measure(gpu, gpu.busy_once, gpu.sync, seconds=1.0, clock=lambda: gpu.now)


def test_the_json_says_ok_skipped_or_failed(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "energy.json"
    monkeypatch.setattr(energy_check, "cuda_unavailable_reason", lambda device: "no driver")
    assert energy_check.main([str(out)]) == 0
    assert json.loads(out.read_text()) == {"status": "skipped",
                                           "reason": "no CUDA device found: no driver"}

    monkeypatch.setattr(energy_check, "cuda_unavailable_reason", lambda device: None)
    figures = EnergyCheck(seconds=5.0, iterations=40, energy_j=3000.0, mean_w=600.0,
                          power_w_before=80.0, power_w_after=590.0)
    seen: list[tuple[int, float]] = []

    def fake_check(device: int, seconds: float) -> EnergyCheck:
        seen.append((device, seconds))
        return figures

    assert energy_check.main([str(out), "--seconds", "5", "--device", "1"], fake_check) == 0
    document = json.loads(out.read_text())
    assert seen == [(1, 5.0)]
    assert document["status"] == "ok"
    assert (document["energy_j"], document["mean_w"]) == (3000.0, 600.0)

    def no_counter(device: int, seconds: float) -> EnergyCheck:
        raise EnergyUnavailable("NVML gives no total-energy counter for this GPU")

    assert energy_check.main([str(out)], no_counter) == 1
    assert json.loads(out.read_text())["status"] == "failed"
