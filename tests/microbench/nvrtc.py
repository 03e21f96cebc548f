"""Find libnvrtc and compile CUDA C with it through ctypes: no GPU, no CuPy needed.

Used by the kernel-compile tests and by microbench/run_on_gpu.sh (which prints the path
it found). The search order, first hit wins:
  1. ZEROHOP_NVRTC_LIB=/path/libnvrtc.so.N (the GPU script sets it);
  2. an NVIDIA wheel on sys.path (`nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib`);
  3. a CUDA toolkit (CUDA_PATH, CUDA_HOME, /usr/local/cuda) or the loader's search path;
  4. the copy CuPy itself loaded (read back from /proc/self/maps), when CuPy imports.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import re
import sys
from pathlib import Path

NVRTC_ENV = "ZEROHOP_NVRTC_LIB"
_WHEEL_PATTERNS = ("nvidia/cu*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*")


def _is_nvrtc_library(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("libnvrtc.so") and "builtins" not in name


def _from_wheels() -> str | None:
    for base in sys.path:
        for pattern in _WHEEL_PATTERNS:
            hits = sorted(p for p in glob.glob(os.path.join(base, pattern)) if _is_nvrtc_library(p))
            if hits:
                return hits[0]
    return None


def _from_toolkit() -> str | None:
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    for root in filter(None, roots):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            hits = sorted(p for p in glob.glob(os.path.join(root, sub, "libnvrtc.so*"))
                          if _is_nvrtc_library(p))
            if hits:
                return hits[0]
    return ctypes.util.find_library("nvrtc")


def _from_cupy() -> str | None:
    """The libnvrtc CuPy loads (CuPy finds it its own way, e.g. via cuda-pathfinder)."""
    try:
        import cupy  # optional: only where CuPy is installed

        cupy.cuda.nvrtc.getVersion()  # loads the library
        maps = Path("/proc/self/maps").read_text(encoding="utf-8")
    except Exception:  # no CuPy, no NVRTC, no /proc: not found this way
        return None
    for match in re.finditer(r"(/\S*/libnvrtc\.so[\w.]*)$", maps, re.M):
        if _is_nvrtc_library(match.group(1)):
            return match.group(1)
    return None


def find_nvrtc() -> str | None:
    """Path of a libnvrtc shared library, or None (see the module docstring's order)."""
    explicit = os.environ.get(NVRTC_ENV)
    if explicit:
        return explicit
    return _from_wheels() or _from_toolkit() or _from_cupy()


def load_nvrtc(path: str) -> ctypes.CDLL:
    """Open libnvrtc; its builtins library, where it sits beside it, is opened first and
    globally, since NVRTC dlopen()s it by name and a wheel's folder is on no search path."""
    folder = os.path.dirname(path)
    if folder:
        for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so*"))):
            if ".alt." not in builtins:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                break
    return ctypes.CDLL(path)


class NvrtcError(RuntimeError):
    """NVRTC rejected the source; the message is its log."""


def compile_source(lib: ctypes.CDLL, source: str, arch: str) -> tuple[str, bytes]:
    """(log, output): PTX text for `compute_XX`, cubin bytes for `sm_XX`."""
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"zh.cu", 0, None, None)
    if rc != 0:
        raise NvrtcError(f"nvrtcCreateProgram returned {rc}")
    try:
        options = (ctypes.c_char_p * 1)(f"--gpu-architecture={arch}".encode())
        rc = lib.nvrtcCompileProgram(prog, 1, options)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            raise NvrtcError(log.value.decode())
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


def compile_ptx(lib: ctypes.CDLL, source: str, arch: str = "compute_90") -> str:
    _, raw = compile_source(lib, source, arch)
    return raw.rstrip(b"\0").decode()


if __name__ == "__main__":  # the GPU script: print the path found, exit 1 when none
    found = find_nvrtc()
    print(found or "")
    sys.exit(0 if found else 1)
