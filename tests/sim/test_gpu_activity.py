"""The modelled energy counter: the exact integral of the modelled board power, idle
or busy, whatever the granularity of the steps and reads that drive it."""

from __future__ import annotations

import numpy as np
import pytest

from zerohop.sim.cost_model.gpu_activity import GpuActivity
from zerohop.sim.cost_model.profiles import load_profiles

pytestmark = pytest.mark.unit

S = 1_000_000_000  # ns


def h100() -> GpuActivity:
    return GpuActivity(load_profiles().gpu("h100-sxm"), 0)  # idle 70 W, TDP 700 W


def run_steps(activity: GpuActivity, start_ns: int, seconds: float, busy: float,
              compute: float, step_ns: int = 10_000_000) -> int:
    """Steps of `step_ns`, `busy` of each one busy, `compute` of that compute-bound."""
    now = start_ns
    for _ in range(round(seconds * S / step_ns)):
        now += step_ns
        busy_s = busy * step_ns / S
        activity.record(now, busy_s, compute * busy_s, 0.0, 0.0)
    return now


def test_an_idle_gpu_uses_idle_power_times_time() -> None:
    activity = h100()
    assert activity.sample(10 * S)["energy_j"] == pytest.approx(70.0 * 10, rel=1e-12)
    assert activity.sample(25 * S)["energy_j"] == pytest.approx(70.0 * 25, rel=1e-12)


def test_a_saturated_gpu_uses_its_steady_power_times_time() -> None:
    activity = h100()
    now = run_steps(activity, 0, 60.0, busy=1.0, compute=1.0)  # 60 τ: settled
    before = activity.sample(now)["energy_j"]
    now = run_steps(activity, now, 10.0, busy=1.0, compute=1.0)
    assert activity.sample(now)["energy_j"] - before == pytest.approx(700.0 * 10, rel=1e-9)
    # memory-bound work draws idle + 0.55 of the swing to TDP: 70 + 0.55 × 630 W
    now = run_steps(activity, now, 60.0, busy=1.0, compute=0.0)
    before = activity.sample(now)["energy_j"]
    now = run_steps(activity, now, 10.0, busy=1.0, compute=0.0)
    assert activity.sample(now)["energy_j"] - before == pytest.approx(416.5 * 10, rel=1e-9)


def test_the_counter_does_not_depend_on_how_the_steps_are_cut() -> None:
    coarse, fine = h100(), h100()
    coarse.record(2 * S, 1.0, 0.5, 0.0, 0.0)  # one 2 s span, half busy
    end = run_steps(fine, 0, 2.0, busy=0.5, compute=0.5)
    assert end == 2 * S
    assert fine.energy_j == pytest.approx(coarse.energy_j, rel=1e-9)
    assert 70.0 * 2 < coarse.energy_j < 700.0 * 2


def test_the_counter_is_the_integral_of_the_power_gauge_through_busy_and_idle() -> None:
    """Steps of 1 ms through a 3 s burst, then 5 s of idle, read every 2 ms (a read
    within 1 ms of the last step shows the gauge as it was): the trapezoid of the
    power readings matches the counter to the trapezoid's own error."""
    activity = h100()
    ts, power, energy = [], [], []
    now = 0
    for ms in range(8000):
        now = ms * 1_000_000
        if 0 < ms <= 3000:
            activity.record(now, 0.0009, 0.0006, 0.0, 0.0)  # 90 % busy, 2/3 compute
        if ms % 2:
            continue
        reading = activity.sample(now)
        ts.append(now / 1e9)
        power.append(reading["power_w"])
        energy.append(reading["energy_j"])
    assert np.all(np.diff(energy) >= 0)
    trapezoid = float(np.sum(np.diff(ts) * (np.array(power[1:]) + power[:-1]) / 2))
    assert energy[-1] - energy[0] == pytest.approx(trapezoid, rel=1e-5)
    assert max(power) > 500.0 and power[-1] < 75.0  # it was busy, then it settled


def test_a_step_that_ends_before_the_last_read_never_takes_energy_back() -> None:
    activity = h100()
    run_steps(activity, 0, 1.0, busy=1.0, compute=1.0)
    read = activity.sample(int(1.5 * S))["energy_j"]
    activity.record(int(1.4 * S), 0.01, 0.01, 0.0, 0.0)  # woke late: ended before the read
    assert activity.sample(int(1.5 * S))["energy_j"] >= read
    assert activity.sample(2 * S)["energy_j"] > read
