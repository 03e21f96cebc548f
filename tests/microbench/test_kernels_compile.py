"""The CUDA C kernels compile with NVRTC for Hopper (sm_90) and say what the host expects.

NVRTC needs no GPU, only its library (found by tests/microbench/nvrtc.py: the
`nvidia-cuda-nvrtc` wheel, a CUDA toolkit, CuPy's own copy, or ZEROHOP_NVRTC_LIB=/path);
the GPU script (microbench/run_on_gpu.sh) finds it and runs these with
ZEROHOP_REQUIRE_GPU=1, where a missing library fails instead of skipping. Checked: the
source compiles without warnings, every kernel exists, host-visible words are read with
volatile loads, and in the PTX every ack store is fenced at system scope after the
payload it vouches for (test_kernel_fences.py checks the same rule on the source, on any
machine). The mutated sources show the PTX check fails on real compiler output.
"""

from __future__ import annotations

import ctypes
import re

import pytest

from tests.microbench.fence_order import mutated_source, ptx_fence_problems
from tests.microbench.nvrtc import compile_ptx, compile_source, find_nvrtc, load_nvrtc
from zerohop.microbench.kernels import KERNEL_NAMES, SOURCE

pytestmark = pytest.mark.gpu

ACK_KERNELS = {"zh_ring_consumer", "zh_ack_from_args", "zh_ack_from_device"}


@pytest.fixture(scope="module")
def nvrtc() -> ctypes.CDLL:
    path = find_nvrtc()
    if path is None:
        pytest.skip("libnvrtc not found (pip install nvidia-cuda-nvrtc, or ZEROHOP_NVRTC_LIB)")
    return load_nvrtc(path)


@pytest.fixture(scope="module")
def ptx(nvrtc: ctypes.CDLL) -> str:
    return compile_ptx(nvrtc, SOURCE)


def _entry(ptx: str, name: str) -> str:
    match = re.search(rf"\.entry {name}\((.*?)\n}}\n", ptx, re.S)
    assert match is not None, f"no .entry {name} in the PTX"
    return match.group(1)


def test_kernels_compile_to_sm90_cubin_without_warnings(nvrtc: ctypes.CDLL) -> None:
    log, cubin = compile_source(nvrtc, SOURCE, "sm_90")
    assert log == ""
    assert cubin[:4] == b"\x7fELF"


def test_ptx_has_every_kernel_and_volatile_polls(ptx: str) -> None:
    for name in KERNEL_NAMES:
        assert f".entry {name}(" in ptx
    assert "ld.volatile.global.u64" in _entry(ptx, "zh_ring_consumer")  # polls re-read
    assert "ld.volatile.global.u32" in _entry(ptx, "zh_gate")


def test_ptx_fences_every_ack_after_its_payload(ptx: str) -> None:
    problems = ptx_fence_problems(ptx)
    assert set(problems) == ACK_KERNELS  # every kernel that acks was found in the PTX
    assert problems == {name: [] for name in ACK_KERNELS}


@pytest.mark.parametrize("mutation", ["fence moved after the ack", "fence removed"])
def test_ptx_check_catches_a_misplaced_fence(nvrtc: ctypes.CDLL, mutation: str) -> None:
    problems = ptx_fence_problems(compile_ptx(nvrtc, mutated_source(SOURCE, mutation)))
    assert set(problems) == ACK_KERNELS
    for name in ACK_KERNELS:
        assert problems[name], f"{mutation}: the PTX of {name} passed"
