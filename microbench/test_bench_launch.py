"""pytest-benchmark entry point.

Kernel-launch latency: async launch, launch + sync round trip, graph replay, stream priority.

Run: `pytest microbench/test_bench_launch.py --benchmark-json=out.json` on a CUDA machine;
the GPU-timed figures are in each benchmark's `extra_info`. Skipped without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def test_launch(benchmark: Any, run_one: Callable[[Any, str], Any]) -> None:
    run_one(benchmark, "launch")
