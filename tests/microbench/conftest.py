"""Fixtures for the microbenchmark tests: a fake CuPy installed as `cupy` on demand."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.microbench.fake_cupy import FakeGpu
from zerohop.microbench import ring
from zerohop.microbench.plan import SMOKE, Plan

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
