"""Finding the CUDA device, and recording what it is and what state it was in.

CuPy is imported here and only here, lazily: `import cupy` works whichever build is
installed (cupy-cuda12x or -13x), and a machine without CuPy or without a GPU gets a
plain reason instead of a traceback. NVML (nvidia-ml-py) adds what CUDA does not say:
driver version, clocks, clock-event (throttle) reasons and the PCIe link. Every NVML
read may fail on its own (virtual machines hide some); a failed read is left unknown.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

from zerohop.microbench.schema import Clocks, Environment, PcieLink

T = TypeVar("T")


class NoCudaDevice(RuntimeError):
    """No usable CUDA device: the benchmarks are skipped, not failed."""


def load_cupy(device: int = 0) -> ModuleType:
    """Import CuPy and make `device` current, or raise NoCudaDevice saying why."""
    try:
        cp = importlib.import_module("cupy")
    except Exception as exc:  # ImportError, or OSError from a missing CUDA library
        raise NoCudaDevice(
            f"CuPy is not importable ({type(exc).__name__}: {exc}); "
            "install cupy-cuda12x or cupy-cuda13x to match the driver"
        ) from exc
    try:
        count = int(cp.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError: no driver, driver too old, no device
        raise NoCudaDevice(f"the CUDA runtime found no device ({exc})") from exc
    if count == 0:
        raise NoCudaDevice("the CUDA runtime reports 0 devices")
    if not 0 <= device < count:
        raise ValueError(f"--device {device}: only devices 0..{count - 1} exist")
    cp.cuda.Device(device).use()
    return cp


def cuda_unavailable_reason(device: int = 0) -> str | None:
    """None when a CUDA device is usable, else why not (for test skips)."""
    try:
        load_cupy(device)
    except (NoCudaDevice, ValueError) as exc:
        return str(exc)
    return None


def collect_environment(cp: ModuleType, device: int = 0) -> Environment:
    """Static facts plus the clocks and clock-event reasons right now ("before")."""
    rt = cp.cuda.runtime
    props: dict[str, Any] = rt.getDeviceProperties(device)
    with nvml_reader(pci_bus_id(cp, device), device) as nvml:
        clocks = nvml.clocks()
        return Environment(
            gpu_name=_text(props.get("name")) or nvml.name(),
            gpu_uuid=nvml.uuid() or _uuid_from_bytes(props.get("uuid")),
            driver_version=nvml.driver_version(),
            cuda_driver_version=_try(lambda: int(rt.driverGetVersion())),
            cuda_runtime_version=_runtime_version(cp),
            cupy_version=str(getattr(cp, "__version__", "")) or None,
            compute_capability=f"{props.get('major')}.{props.get('minor')}",
            sm_count=_int_or_none(props.get("multiProcessorCount")),
            pcie=nvml.link(),
            clocks_before=clocks,
            clock_event_reasons_before=nvml.clock_event_reasons(),
        )


def read_clock_state(cp: ModuleType, device: int = 0) -> tuple[Clocks, list[str]]:
    """Clocks and clock-event reasons now (the "after" half of the environment)."""
    with nvml_reader(pci_bus_id(cp, device), device) as nvml:
        return nvml.clocks(), nvml.clock_event_reasons()


def pci_bus_id(cp: ModuleType, device: int = 0) -> str | None:
    """The device's PCI bus id as CUDA sees it (matches it to its NVML handle)."""
    return _try(lambda: str(cp.cuda.runtime.deviceGetPCIBusId(device)))


# --- NVML ---------------------------------------------------------------------------------
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_clock_event_reasons(mask: int) -> list[str]:
    """NVML's clock-event (throttle) bitmask as names; ["none"] when no bit is set."""
    if mask == 0:
        return ["none"]
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


class NvmlReader:
    """NVML for one device; every getter returns None (or []) when NVML cannot say."""

    def __init__(self, nvml: Any | None, handle: Any | None, reason: str | None) -> None:
        self._nvml = nvml
        self._handle = handle
        self.reason = reason  # why NVML is unavailable, when it is

    def _call(self, name: str, *args: Any) -> Any:
        if self._nvml is None or self._handle is None:
            return None
        fn = getattr(self._nvml, name, None)
        if fn is None:
            return None
        return _try(lambda: fn(self._handle, *args))

    def name(self) -> str | None:
        return _text(self._call("nvmlDeviceGetName"))

    def uuid(self) -> str | None:
        return _text(self._call("nvmlDeviceGetUUID"))

    def driver_version(self) -> str | None:
        if self._nvml is None:
            return None
        return _text(_try(self._nvml.nvmlSystemGetDriverVersion))

    def clocks(self) -> Clocks:
        if self._nvml is None:
            return Clocks()
        sm_id = getattr(self._nvml, "NVML_CLOCK_SM", 1)
        mem_id = getattr(self._nvml, "NVML_CLOCK_MEM", 2)
        return Clocks(
            sm_mhz=_int_or_none(self._call("nvmlDeviceGetClockInfo", sm_id)),
            mem_mhz=_int_or_none(self._call("nvmlDeviceGetClockInfo", mem_id)),
        )

    def total_energy_j(self) -> float | None:
        """The board's energy counter since the driver loaded, J (Volta and newer)."""
        mj = self._call("nvmlDeviceGetTotalEnergyConsumption")
        return None if mj is None else float(mj) / 1000.0

    def power_w(self) -> float | None:
        mw = self._call("nvmlDeviceGetPowerUsage")
        return None if mw is None else float(mw) / 1000.0

    def clock_event_reasons(self) -> list[str]:
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons")
        return [] if mask is None else decode_clock_event_reasons(int(mask))

    def link(self) -> PcieLink:
        return PcieLink(
            gen=_int_or_none(self._call("nvmlDeviceGetCurrPcieLinkGeneration")),
            width=_int_or_none(self._call("nvmlDeviceGetCurrPcieLinkWidth")),
            max_gen=_int_or_none(self._call("nvmlDeviceGetMaxPcieLinkGeneration")),
            max_width=_int_or_none(self._call("nvmlDeviceGetMaxPcieLinkWidth")),
        )


@contextlib.contextmanager
def nvml_reader(bus_id: str | None, index: int) -> Iterator[NvmlReader]:
    """An NvmlReader for the CUDA device (matched by PCI bus id, else by index)."""
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception as exc:
        yield NvmlReader(None, None, f"NVML not available: {exc}")
        return
    try:
        handle = None
        if bus_id:
            handle = _try(lambda: nvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode()))
        if handle is None:
            handle = _try(lambda: nvml.nvmlDeviceGetHandleByIndex(index))
        reason = None if handle is not None else f"NVML has no handle for device {index}"
        yield NvmlReader(nvml, handle, reason)
    finally:
        _try(nvml.nvmlShutdown)


# --- small helpers ------------------------------------------------------------------------
def gpu_slug(name: str | None) -> str:
    """A file-name-safe form of the GPU name: "NVIDIA H200" -> "nvidia-h200"."""
    slug = re.sub(r"[^a-z0-9]+", "-", (name or "unknown-gpu").lower()).strip("-")
    return slug or "unknown-gpu"


def _try(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    text = str(value).strip()
    return text or None


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _uuid_from_bytes(raw: Any) -> str | None:
    if not isinstance(raw, bytes | bytearray) or len(raw) != 16:
        return None
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _runtime_version(cp: ModuleType) -> int | None:
    local = getattr(cp.cuda, "get_local_runtime_version", None)
    if local is not None:
        version = _try(lambda: int(local()))
        if version:
            return version
    return _try(lambda: int(cp.cuda.runtime.runtimeGetVersion()))
