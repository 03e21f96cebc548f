"""pytest-benchmark entry point.

Ring-buffer enqueue through zero-copy memory vs a launch per request and memcpy + launch.

Run: `pytest microbench/test_bench_ring.py --benchmark-json=out.json` on a CUDA machine;
the GPU-timed figures are in each benchmark's `extra_info`. Skipped without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def test_ring(benchmark: Any, run_one: Callable[[Any, str], Any]) -> None:
    run_one(benchmark, "ring")
