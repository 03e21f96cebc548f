"""CUDA discovery and the NVML reader (through a fake pynvml)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from zerohop.microbench.gpu_env import (
    NoCudaDevice,
    NvmlReader,
    cuda_unavailable_reason,
    decode_clock_event_reasons,
    gpu_slug,
    load_cupy,
    nvml_reader,
)

pytestmark = pytest.mark.unit


class NvmlNotSupported(Exception):
    pass


def fake_pynvml(*, event_api: bool = True, unsupported: tuple[str, ...] = ()) -> Any:
    calls: list[str] = []

    def fn(name: str, value: Any) -> Any:
        def call(*args: Any) -> Any:
            calls.append(name)
            if name in unsupported:
                raise NvmlNotSupported(name)
            return value(*args) if callable(value) else value
        return call

    m = types.SimpleNamespace(NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, calls=calls)
    m.nvmlInit = fn("init", None)
    m.nvmlShutdown = fn("shutdown", None)
    m.nvmlDeviceGetHandleByPciBusId = fn("by_bus", lambda bus: ("handle", bus))
    m.nvmlDeviceGetHandleByIndex = fn("by_index", lambda i: ("handle", i))
    m.nvmlDeviceGetName = fn("nvmlDeviceGetName", b"NVIDIA H200")
    m.nvmlDeviceGetUUID = fn("nvmlDeviceGetUUID", "GPU-abc")
    m.nvmlSystemGetDriverVersion = fn("driver", "580.159.04")
    m.nvmlDeviceGetClockInfo = fn("clock", lambda h, which: {1: 1980, 2: 3201}[which])
    m.nvmlDeviceGetCurrPcieLinkGeneration = fn("nvmlDeviceGetCurrPcieLinkGeneration", 5)
    m.nvmlDeviceGetCurrPcieLinkWidth = fn("nvmlDeviceGetCurrPcieLinkWidth", 16)
    m.nvmlDeviceGetMaxPcieLinkGeneration = fn("nvmlDeviceGetMaxPcieLinkGeneration", 5)
    m.nvmlDeviceGetMaxPcieLinkWidth = fn("nvmlDeviceGetMaxPcieLinkWidth", 16)
    m.nvmlDeviceGetCurrentClocksThrottleReasons = fn("throttle", 0x4)
    if event_api:
        m.nvmlDeviceGetCurrentClocksEventReasons = fn("events", 0x1 | 0x40)
    return m


def test_decode_clock_event_reasons() -> None:
    assert decode_clock_event_reasons(0) == ["none"]
    assert decode_clock_event_reasons(0x1) == ["gpu_idle"]
    assert decode_clock_event_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_clock_event_reasons(0x1000) == ["unknown_0x1000"]


def test_nvml_reader_reads_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with nvml_reader("0000:1B:00.0", 0) as reader:
        assert reader.reason is None
        assert reader.name() == "NVIDIA H200"
        assert reader.uuid() == "GPU-abc"
        assert reader.driver_version() == "580.159.04"
        clocks = reader.clocks()
        assert (clocks.sm_mhz, clocks.mem_mhz) == (1980, 3201)
        assert reader.clock_event_reasons() == ["gpu_idle", "hw_thermal_slowdown"]
        link = reader.link()
        assert (link.gen, link.width, link.max_gen, link.max_width) == (5, 16, 5, 16)
    assert "by_bus" in nvml.calls and "by_index" not in nvml.calls
    assert nvml.calls[-1] == "shutdown"


def test_nvml_reader_falls_back_and_leaves_unsupported_fields_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = fake_pynvml(event_api=False, unsupported=(
        "by_bus", "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth"))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with nvml_reader("0000:1B:00.0", 3) as reader:
        assert reader.clock_event_reasons() == ["sw_power_cap"]  # the older throttle API
        link = reader.link()
        assert (link.gen, link.width, link.max_gen) == (None, None, 5)
    assert "by_index" in nvml.calls


def test_nvml_unavailable_gives_an_empty_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = types.SimpleNamespace(nvmlInit=lambda: (_ for _ in ()).throw(OSError("no lib")))
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    with nvml_reader(None, 0) as reader:
        assert reader.reason and "no lib" in reader.reason
        assert reader.clocks().sm_mhz is None
        assert reader.clock_event_reasons() == []
        assert reader.link().gen is None
        assert reader.driver_version() is None
    assert NvmlReader(None, None, "x").name() is None


@pytest.mark.usefixtures("no_cupy")
def test_without_cupy_the_reason_says_so() -> None:
    with pytest.raises(NoCudaDevice, match="CuPy is not importable"):
        load_cupy()
    reason = cuda_unavailable_reason()
    assert reason and "cupy-cuda12x or cupy-cuda13x" in reason


def test_no_device_and_bad_index(fake_gpu: Any) -> None:
    fake_gpu(device_count=0)
    with pytest.raises(NoCudaDevice, match="0 devices"):
        load_cupy()
    fake_gpu(device_count=1)
    with pytest.raises(ValueError, match="--device 2"):
        load_cupy(2)
    assert load_cupy(0) is sys.modules["cupy"]


def test_gpu_slug() -> None:
    assert gpu_slug("NVIDIA H200") == "nvidia-h200"
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert gpu_slug(None) == "unknown-gpu"
    assert gpu_slug("///") == "unknown-gpu"
