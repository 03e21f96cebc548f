"""What every benchmark receives, and the small timing helpers they share."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from zerohop.microbench.cuda_mem import StreamGate
from zerohop.microbench.kernels import Kernels
from zerohop.microbench.plan import Plan
from zerohop.microbench.progress import Progress
from zerohop.microbench.schema import PcieLink


@dataclass
class BenchContext:
    cp: ModuleType
    kernels: Kernels
    plan: Plan
    progress: Progress
    device: int = 0
    sm_count: int = 1
    max_threads_per_sm: int = 2048
    can_map_host_memory: bool = True
    # Filled by the PCIe benchmark: the link read while a large copy was running.
    link_under_load: PcieLink | None = field(default=None)


class Deadline:
    """A wall-clock budget: loops check `passed()` and stop early, keeping what they have."""

    def __init__(self, seconds: float) -> None:
        self._end = time.perf_counter() + seconds

    def passed(self) -> bool:
        return time.perf_counter() > self._end


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Keep Python's cyclic garbage collector out of a timed loop."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def gated(gate: StreamGate, stream: Any) -> Iterator[None]:
    """Hold `stream` behind the gate while the body enqueues; always release."""
    gate.hold(stream)
    try:
        yield
    finally:
        gate.release()


def elapsed_us(cp: ModuleType, start: Any, end: Any) -> float:
    """GPU time between two recorded events, in microseconds."""
    return float(cp.cuda.get_elapsed_time(start, end)) * 1e3
