"""pytest-benchmark entry point.

PCIe throughput (H2D, D2H, bidirectional; pinned and pageable) and small-copy latency.

Run: `pytest microbench/test_bench_pcie.py --benchmark-json=out.json` on a CUDA machine;
the GPU-timed figures are in each benchmark's `extra_info`. Skipped without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def test_pcie(benchmark: Any, run_one: Callable[[Any, str], Any]) -> None:
    run_one(benchmark, "pcie")
