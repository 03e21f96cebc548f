"""Fixtures for the microbenchmark tests: a fake CuPy installed as `cupy` on demand.

ZEROHOP_REQUIRE_GPU=1 (microbench/run_on_gpu.sh sets it) turns every skip of a `gpu`
test here into a failure: on the lent GPU machine a missing CuPy, device or NVRTC must
not pass as "skipped", the way ZEROHOP_REQUIRE_VLLM=1 does for the vLLM tier.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from tests.microbench.fake_cupy import FakeGpu
from zerohop.microbench import ring
from zerohop.microbench.plan import SMOKE, Plan

REQUIRE_GPU_ENV = "ZEROHOP_REQUIRE_GPU"


def fail_required_gpu_skip(item: pytest.Item, report: pytest.TestReport) -> None:
    """Under ZEROHOP_REQUIRE_GPU=1, a skipped `gpu` test is reported as failed instead."""
    if os.environ.get(REQUIRE_GPU_ENV) != "1" or not report.skipped:
        return
    if hasattr(report, "wasxfail") or item.get_closest_marker("gpu") is None:
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    report.outcome = "failed"
    report.longrepr = f"{REQUIRE_GPU_ENV}=1 but {item.nodeid} skipped: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    fail_required_gpu_skip(item, outcome.get_result())


# The smoke plan, smaller still: the fake runs kernels as Python threads on a shared CPU.
TINY: Plan = dataclasses.replace(
    SMOKE,
    launch_roundtrip_samples=100,
    ring_roundtrip_samples=100,
    ring_compare_samples=50,
    ring_descriptor_bytes=(16, 32, 64),
    pcie_max_bytes=1 << 20,
    pcie_small_copy_samples=10,
)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeGpu]]:
    """Call it (with FakeGpu options) to install a fake `cupy`; undone after the test."""
    # Python threads on a busy shared CPU can stall far longer than a GPU ever would.
    monkeypatch.setattr(ring, "ACK_TIMEOUT_S", 10.0)
    monkeypatch.setattr(ring, "START_TIMEOUT_S", 20.0)
    created: list[FakeGpu] = []
    saved_module = sys.modules.get("cupy")
    saved_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # host and "device" threads spin against each other

    def install(**options: Any) -> FakeGpu:
        gpu = FakeGpu(**options)
        created.append(gpu)
        sys.modules["cupy"] = gpu.module()
        return gpu

    try:
        yield install
    finally:
        for gpu in created:
            gpu.shutdown()
        sys.setswitchinterval(saved_interval)
        if saved_module is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved_module


@pytest.fixture
def no_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import cupy` fail even where CuPy is installed."""
    monkeypatch.setitem(sys.modules, "cupy", None)
