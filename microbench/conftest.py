"""Shared fixtures of the pytest-benchmark entry points (`pytest microbench/`).

Each entry point runs one microbenchmark once through `benchmark.pedantic` (the
host-side wall time of the whole run is what pytest-benchmark times) and puts the
GPU-timed figures in `benchmark.extra_info`, so `--benchmark-json` carries them; it
fails unless the benchmark is ok and its figures are plausible
(`tests/microbench/plausibility.py`). The preset comes from ZEROHOP_MICROBENCH_PLAN
(full, quick, smoke; default quick).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from tests.microbench.plausibility import plausibility_violations
from tests.tiers import skip_unless_required

from zerohop.microbench.gpu_env import cuda_unavailable_reason
from zerohop.microbench.plan import Plan, get_plan
from zerohop.microbench.runner import run_benchmarks
from zerohop.microbench.schema import MicrobenchResult


@pytest.fixture(scope="session")
def require_cuda() -> None:
    """Skips without CUDA, unless ZEROHOP_REQUIRE_GPU=1 (microbench/run_on_gpu.sh): then
    a missing CuPy or device fails instead of passing as skipped."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        skip_unless_required("ZEROHOP_REQUIRE_GPU", f"needs a CUDA device and CuPy: {reason}")


@pytest.fixture(scope="session")
def microbench_plan() -> Plan:
    return get_plan(os.environ.get("ZEROHOP_MICROBENCH_PLAN", "quick"))


@pytest.fixture
def run_one(
    require_cuda: None, microbench_plan: Plan
) -> Callable[[Any, str], MicrobenchResult]:
    """run_one(benchmark, name): run it, record its figures, fail unless it is ok."""

    def run(benchmark: Any, name: str) -> MicrobenchResult:
        result: MicrobenchResult = benchmark.pedantic(
            run_benchmarks, args=([name], microbench_plan), rounds=1, iterations=1
        )
        bench = result.benchmarks[name]
        env = result.environment
        benchmark.extra_info.update(
            {
                "plan": microbench_plan.name,
                "gpu_name": env.gpu_name,
                "driver_version": env.driver_version,
                "status": bench.status,
                "reason": bench.reason,
                "metrics": {k: v.model_dump() for k, v in bench.metrics.items()},
            }
        )
        if bench.curve is not None:
            benchmark.extra_info["curve"] = [p.model_dump() for p in bench.curve]
            benchmark.extra_info["pcie"] = env.pcie.model_dump()
        assert bench.status == "ok", bench.reason
        violations = plausibility_violations(result)
        assert violations == [], "implausible figures:\n" + "\n".join(map(str, violations))
        return result

    return run
