"""Where the kernel-compile tests look for libnvrtc (tests/microbench/nvrtc.py)."""

from __future__ import annotations

import ctypes.util
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.microbench import nvrtc

pytestmark = pytest.mark.unit


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch, no_cupy: None) -> None:
    """No variable, no wheel, no toolkit, no CuPy: nothing to find but what a test adds."""
    monkeypatch.delenv(nvrtc.NVRTC_ENV, raising=False)
    for name in ("CUDA_PATH", "CUDA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "path", [])
    monkeypatch.setattr(nvrtc.glob, "glob", _only_tmp(nvrtc.glob.glob))
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)


def _only_tmp(real_glob: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """/usr/local/cuda of this machine must not leak into the tests."""
    return lambda pattern: [] if pattern.startswith("/usr/local/cuda") else real_glob(pattern)


def test_nothing_found_is_none(nowhere: None) -> None:
    assert nvrtc.find_nvrtc() is None


def test_the_variable_wins(nowhere: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(nvrtc.NVRTC_ENV, "/opt/x/libnvrtc.so.13")
    assert nvrtc.find_nvrtc() == "/opt/x/libnvrtc.so.13"


def test_a_wheel_on_sys_path_is_found_not_its_builtins(
    nowhere: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    _touch(lib / "libnvrtc-builtins.so.13.0")
    _touch(lib / "libnvrtc.alt.so.13")
    wanted = _touch(lib / "libnvrtc.so.13")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), str(tmp_path)])
    assert nvrtc.find_nvrtc() == str(wanted)


def test_a_toolkit_is_found(nowhere: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wanted = _touch(tmp_path / "lib64" / "libnvrtc.so.12")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert nvrtc.find_nvrtc() == str(wanted)
