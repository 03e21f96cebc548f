"""The microbenchmarks on a real CUDA device (skipped without one).

The smoke plan keeps this to seconds. What the fake cannot show is checked here: the
CUDA C kernels compile and behave (the gate releases and times out, the persistent
kernel stops on its stop word, the ring's hashes match), copies verify byte for byte,
and every figure lies in its plausible range (`tests/microbench/plausibility.py`: a
µs/ms slip, swapped stream priorities or a copy far below the link fail). Under
ZEROHOP_REQUIRE_GPU=1 (microbench/run_on_gpu.sh) a missing device fails, not skips.
"""

from __future__ import annotations

import time
from types import ModuleType

import pytest

from tests.microbench.plausibility import plausibility_violations
from zerohop.microbench.context import BenchContext, Deadline
from zerohop.microbench.cuda_mem import StreamGate
from zerohop.microbench.gpu_env import cuda_unavailable_reason, load_cupy
from zerohop.microbench.kernels import STATE_STOPPED, Kernels
from zerohop.microbench.plan import SMOKE
from zerohop.microbench.progress import NullProgress
from zerohop.microbench.ring import Payloads, RingSession
from zerohop.microbench.runner import run_benchmarks

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp() -> ModuleType:
    reason = cuda_unavailable_reason()
    if reason is not None:
        pytest.skip(f"needs a CUDA device and CuPy: {reason}")
    return load_cupy()


@pytest.fixture(scope="module")
def kernels(cp: ModuleType) -> Kernels:
    compiled = Kernels(cp)
    compiled.compile_all()
    return compiled


def test_gate_holds_until_released_and_gives_up_alone(cp: ModuleType, kernels: Kernels) -> None:
    gate = StreamGate(cp, kernels, timeout_s=0.2)
    stream = cp.cuda.Stream(non_blocking=True)
    done = cp.cuda.Event()
    try:
        gate.hold(stream)
        done.record(stream)
        time.sleep(0.02)
        assert not done.done  # held
        gate.release()
        done.synchronize()
        assert gate.released_in_time()
        gate.hold(stream)  # never released: the kernel ends by itself
        t0 = time.perf_counter()
        stream.synchronize()
        assert 0.15 < time.perf_counter() - t0 < 5.0
        assert not gate.released_in_time()
    finally:
        gate.close()


def test_persistent_kernel_round_trips_and_stops(cp: ModuleType, kernels: Kernels) -> None:
    ctx = BenchContext(cp=cp, kernels=kernels, plan=SMOKE, progress=NullProgress())
    session = RingSession(ctx, Payloads(64, seed=1))
    try:
        session.start()
        samples, bad = session.roundtrips(100, Deadline(10))
        rates = session.sustained_rate(2, 0.05, 32)
        assert bad == 0
        assert session.verify_totals() is None
        assert len(samples) == 100 and all(s > 0 for s in samples)
        assert all(r > 0 for r in rates)
        t0 = time.perf_counter()
        assert session.stop() == STATE_STOPPED
        assert time.perf_counter() - t0 < 1.0  # the stop word, not the timeout
    finally:
        session.close()


def test_smoke_plan_end_to_end(cp: ModuleType) -> None:
    result = run_benchmarks(["launch", "ring", "pcie"], SMOKE)
    assert result.status == "ok", result.reason
    env = result.environment
    assert env.gpu_name and env.sm_count and env.compute_capability
    pcie = result.benchmarks["pcie"]
    assert pcie.curve and all(p.verified for p in pcie.curve)
    violations = plausibility_violations(result)
    assert violations == [], "implausible figures:\n" + "\n".join(map(str, violations))
