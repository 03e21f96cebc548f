"""NVML's energy counter over a busy loop on a real GPU (skipped without one; under
ZEROHOP_REQUIRE_GPU=1, as microbench/run_on_gpu.sh sets, the skip is a failure)."""

from __future__ import annotations

import pytest

from zerohop.microbench.energy_check import run_energy_check
from zerohop.microbench.gpu_env import cuda_unavailable_reason

pytestmark = pytest.mark.gpu


def test_a_busy_loop_draws_plausible_power() -> None:
    reason = cuda_unavailable_reason()
    if reason is not None:
        pytest.skip(f"needs a CUDA device and CuPy: {reason}")
    check = run_energy_check(seconds=2.0)
    assert check.iterations > 0 and check.seconds >= 2.0
    # a datacentre GPU kept busy draws tens to hundreds of watts, never kilowatts
    assert 20.0 < check.mean_w < 1500.0
    assert check.energy_j == pytest.approx(check.mean_w * check.seconds)
    if check.power_w_after is not None:  # the driver's 1 s average ends inside the loop
        assert 0.5 * check.mean_w < check.power_w_after < 2.0 * check.mean_w
