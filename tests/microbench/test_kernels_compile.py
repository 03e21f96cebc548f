"""The CUDA C kernels compile with NVRTC for Hopper (sm_90) and say what the host expects.

NVRTC needs no GPU, only its library: this runs wherever `libnvrtc` can be found (the
`nvidia-cuda-nvrtc` wheel, a CUDA toolkit, or ZEROHOP_NVRTC_LIB=/path/libnvrtc.so) and
skips elsewhere. It checks the source compiles without warnings, every kernel exists, and
the loads and stores that talk to the host are volatile and fenced at system scope.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import re
import sys

import pytest

from zerohop.microbench.kernels import KERNEL_NAMES, SOURCE

pytestmark = pytest.mark.unit


def find_nvrtc() -> str | None:
    explicit = os.environ.get("ZEROHOP_NVRTC_LIB")
    if explicit:
        return explicit
    for base in sys.path:
        for pattern in ("nvidia/cu*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*"):
            hits = sorted(p for p in glob.glob(os.path.join(base, pattern)) if "builtins" not in p)
            if hits:
                return hits[0]
    return ctypes.util.find_library("nvrtc")


def compile_source(lib: ctypes.CDLL, arch: str) -> tuple[str, bytes]:
    """(log, output): PTX text for compute_XX, cubin bytes for sm_XX."""
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), SOURCE.encode(), b"zh.cu", 0, None,
                                  None) == 0
    try:
        options = (ctypes.c_char_p * 1)(f"--gpu-architecture={arch}".encode())
        rc = lib.nvrtcCompileProgram(prog, 1, options)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        assert rc == 0, log.value.decode()
        if arch.startswith("compute_"):
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            out = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, out)
        else:
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            out = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetCUBIN(prog, out)
        return log.value.decode().strip(), out.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


@pytest.fixture(scope="module")
def nvrtc() -> ctypes.CDLL:
    path = find_nvrtc()
    if path is None:
        pytest.skip("libnvrtc not found (pip install nvidia-cuda-nvrtc, or ZEROHOP_NVRTC_LIB)")
    return ctypes.CDLL(path)


def test_kernels_compile_to_sm90_cubin_without_warnings(nvrtc: ctypes.CDLL) -> None:
    log, cubin = compile_source(nvrtc, "sm_90")
    assert log == ""
    assert cubin[:4] == b"\x7fELF"


def test_ptx_has_every_kernel_and_system_scope_ordering(nvrtc: ctypes.CDLL) -> None:
    _, raw = compile_source(nvrtc, "compute_90")
    ptx = raw.rstrip(b"\0").decode()
    for name in KERNEL_NAMES:
        assert f".entry {name}(" in ptx
    consumer = re.search(r"\.entry zh_ring_consumer\((.*?)\n}\n", ptx, re.S)
    assert consumer is not None
    body = consumer.group(1)
    assert "ld.volatile.global.u64" in body  # polls re-read host memory
    # the ack (word 8 = byte 64) is stored after a system-scope fence
    ack = body.index("[%rd4+64]") if "[%rd4+64]" in body else body.rindex("+64]")
    assert "membar.sys" in body[:ack] or "fence.sc.sys" in body[:ack]
    gate = re.search(r"\.entry zh_gate\((.*?)\n}\n", ptx, re.S)
    assert gate is not None and "ld.volatile.global.u32" in gate.group(1)
