"""GPU sampling through NVML, behind a seam that tests replace with a fake.

The samplers read through `nvml_api.NvmlApi` (the NVML calls zerohop makes, plain numbers
out, `pynvml.NVMLError` subclasses raised); `nvml_api.PynvmlApi` is the real one.
`NvmlSampler` reads every GPU once per tick. What each metric means (and over which
window the driver measures it) is in `canonical.GLOSSARY`; in short:

- utilisation (`gpu_sm_util_pct`, `gpu_mem_util_pct`): percent of the driver's last
  sample period (1/6 s to 1 s depending on the product) in which *any* kernel ran / memory
  was touched. It is not SM occupancy; GPM's `gpu_sm_active_pct` is the closer figure.
- PCIe throughput: the driver measures a 20 ms window per call, and the call blocks for
  it, so it runs in its own thread (`NvmlPcieSampler`) and is a spot reading.
- power: `nvmlDeviceGetPowerUsage` is a 1 s average on Ampere+ (except GA100);
  the instantaneous and averaged field values are read separately where offered.
- energy: `nvmlDeviceGetTotalEnergyConsumption`, the board's energy since the driver
  loaded (Volta and newer), a counter; its deltas are exact where power samples between
  two ticks are not (`analysis/server/energy.py`).
- GPM (Hopper+): SM activity, occupancy, tensor activity and DRAM bandwidth over the
  interval between two consecutive samples.

Errors are sorted into three kinds: a field the GPU or driver does not offer
(NotSupported and friends) is recorded once as `unsupported` and never asked again; a
lost device (GpuIsLost, ...) opens a gap for that GPU, retried once a second while the
other GPUs go on; anything else is a gap on that one field until it reads again.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import pynvml

from zerohop.telemetry.nvml_api import NvmlApi
from zerohop.telemetry.samples import (
    GapTracker,
    Sample,
    TelemetryClock,
    describe_error,
    labels_json,
    unsupported_row,
)

SOURCE = "nvml"

# field ids / enum values (stable across NVML versions)
FI_POWER_AVERAGE = 185  # NVML_FI_DEV_POWER_AVERAGE, mW
FI_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT, mW
CLOCK_SM = 1
CLOCK_MEM = 2
PCIE_TX = 0
PCIE_RX = 1
GPM_METRICS: dict[int, str] = {
    2: "gpu_sm_active_pct",  # NVML_GPM_METRIC_SM_UTIL
    3: "gpu_sm_occupancy_pct",  # NVML_GPM_METRIC_SM_OCCUPANCY
    5: "gpu_tensor_active_pct",  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    10: "gpu_dram_active_pct",  # NVML_GPM_METRIC_DRAM_BW_UTIL
}

UNSUPPORTED_CODES = frozenset({
    pynvml.NVML_ERROR_NOT_SUPPORTED,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    pynvml.NVML_ERROR_NO_PERMISSION,
    pynvml.NVML_ERROR_INVALID_ARGUMENT,
    pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    pynvml.NVML_ERROR_DEPRECATED,
})
DEVICE_LOST_CODES = frozenset({
    pynvml.NVML_ERROR_GPU_IS_LOST,
    pynvml.NVML_ERROR_RESET_REQUIRED,
    pynvml.NVML_ERROR_GPU_NOT_FOUND,
    pynvml.NVML_ERROR_UNINITIALIZED,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
})
DEVICE_RETRY_S = 1.0


class NvmlSampler:
    """Reads every GPU once per tick (all fields but PCIe throughput)."""

    name = "nvml"
    source = SOURCE

    def __init__(self, api: NvmlApi, clock: TelemetryClock, *, interval_s: float = 0.1,
                 gpm: bool = True) -> None:
        self.api = api
        self.clock = clock
        self.interval_s = interval_s
        self.use_gpm = gpm
        self.gaps = GapTracker(SOURCE)
        self.devices: list[_Device] = []
        self.available = False

    def start(self, ts: float) -> list[Sample]:
        try:
            self.api.init()
            count = self.api.device_count()
        except Exception as exc:  # no library / no driver: one gap, the run goes on
            return self.gaps.missing(ts, f"NVML not available: {nvml_reason(exc)}")
        if count == 0:
            return self.gaps.missing(ts, "NVML: no GPU found")
        self.available = True
        rows: list[Sample] = []
        for index in range(count):
            device = _Device(index)
            self.devices.append(device)
            rows.extend(self._attach(device, ts))
        return rows

    def tick(self, ts: float) -> list[Sample]:
        rows: list[Sample] = []
        for device in self.devices:
            if device.handle is None:
                if ts - device.last_attempt < DEVICE_RETRY_S:
                    continue
                rows.extend(self._attach(device, ts))
                if device.handle is None:
                    continue
            rows.extend(self._read_device(device, ts))
        return rows

    def close(self, ts: float) -> list[Sample]:
        for device in self.devices:
            previous, device.gpm_previous = device.gpm_previous, None
            if previous is not None:
                _quietly(functools.partial(self.api.gpm_free, previous))
        if self.available:
            _quietly(self.api.shutdown)
        return self.gaps.close_all(ts)

    # --- per device -------------------------------------------------------------------
    def _attach(self, device: _Device, ts: float) -> list[Sample]:
        device.last_attempt = ts
        try:
            device.handle = self.api.device_handle(device.index)
        except Exception as exc:
            device.handle = None
            return self.gaps.missing(ts, nvml_reason(exc), device.scope)
        rows = self.gaps.present(ts, device.scope)
        if self.use_gpm and device.gpm is None:
            try:
                device.gpm = bool(self.api.gpm_supported(device.handle))
            except Exception as exc:
                device.gpm = False
                rows.extend(device.mark_unsupported(ts, "gpm", nvml_reason(exc)))
            if device.gpm is False and "gpm" not in device.unsupported:
                rows.extend(device.mark_unsupported(ts, "gpm", "GPM not supported"))
        return rows

    def _read_device(self, device: _Device, ts: float) -> list[Sample]:
        reader = _FieldReader(self, device, ts)
        h = device.handle
        api = self.api
        reader.pair(("gpu_sm_util_pct", "gpu_mem_util_pct"), "nvmlDeviceGetUtilizationRates",
                    lambda: api.utilization_rates(h))
        reader.pair(("gpu_mem_used_bytes", "gpu_mem_total_bytes"), "nvmlDeviceGetMemoryInfo",
                    lambda: api.memory_info(h))
        reader.one("gpu_temp_c", "nvmlDeviceGetTemperature", lambda: api.temperature_c(h))
        reader.one("gpu_power_w", "nvmlDeviceGetPowerUsage", lambda: api.power_usage_w(h))
        reader.one("gpu_energy_j", "nvmlDeviceGetTotalEnergyConsumption",
                   lambda: api.total_energy_j(h))
        reader.fields(h)
        reader.one("gpu_sm_clock_mhz", "nvmlDeviceGetClockInfo(SM)",
                   lambda: api.clock_mhz(h, CLOCK_SM))
        reader.one("gpu_mem_clock_mhz", "nvmlDeviceGetClockInfo(MEM)",
                   lambda: api.clock_mhz(h, CLOCK_MEM))
        reader.one("gpu_throttle_reasons", "nvmlDeviceGetCurrentClocksEventReasons",
                   lambda: float(api.clocks_event_reasons(h)))
        reader.one("pcie_link_gen", "nvmlDeviceGetCurrPcieLinkGeneration",
                   lambda: float(api.pcie_link_generation(h)))
        reader.one("pcie_link_width", "nvmlDeviceGetCurrPcieLinkWidth",
                   lambda: float(api.pcie_link_width(h)))
        if device.gpm:
            reader.gpm(h)
        if reader.lost is not None:
            device.handle = None
            device.last_attempt = ts
            if device.gpm_previous is not None:
                _quietly(functools.partial(self.api.gpm_free, device.gpm_previous))
                device.gpm_previous = None
            return [*reader.rows, *self.gaps.missing(ts, reader.lost, device.scope)]
        return reader.rows


class NvmlPcieSampler:
    """PCIe RX/TX throughput in its own thread: each read blocks ~20 ms in the driver."""

    name = "nvml-pcie"
    source = SOURCE

    def __init__(self, api: NvmlApi, clock: TelemetryClock, *, interval_s: float = 0.1) -> None:
        self.api = api
        self.clock = clock
        self.interval_s = interval_s
        self.devices: list[_Device] = []
        self.gaps = GapTracker(SOURCE)

    def start(self, ts: float) -> list[Sample]:
        try:
            self.api.init()
            count = self.api.device_count()
        except Exception:
            return []  # the main NVML sampler records why
        self.devices = [_Device(i) for i in range(count)]
        return []

    def tick(self, ts: float) -> list[Sample]:
        rows: list[Sample] = []
        for device in self.devices:
            if device.handle is None:
                try:
                    device.handle = self.api.device_handle(device.index)
                except Exception:
                    continue  # the main sampler records the lost device
            reader = _FieldReader(self, device, ts)
            for metric, counter, call in (("pcie_rx_bytes_per_s", PCIE_RX, "RX"),
                                          ("pcie_tx_bytes_per_s", PCIE_TX, "TX")):
                reader.timed(metric, f"nvmlDeviceGetPcieThroughput({call})",
                             functools.partial(self.api.pcie_throughput_bytes_per_s,
                                               device.handle, counter))
            if reader.lost is not None:
                device.handle = None
            rows.extend(reader.rows)
        return rows

    def close(self, ts: float) -> list[Sample]:
        if self.devices:
            _quietly(self.api.shutdown)
        return self.gaps.close_all(ts)


class _Device:
    def __init__(self, index: int) -> None:
        self.index = index
        self.scope = {"gpu": str(index)}
        self.labels = labels_json(self.scope)
        self.handle: Any = None
        self.last_attempt = -math.inf
        self.unsupported: set[str] = set()
        self.gpm: bool | None = None
        self.gpm_previous: Any = None

    def mark_unsupported(self, ts: float, metric: str, reason: str) -> list[Sample]:
        if metric in self.unsupported:
            return []
        self.unsupported.add(metric)
        return [unsupported_row(ts, SOURCE, metric, reason, self.scope)]


class _FieldReader:
    """One device's reads for one tick: each read either adds rows, marks its field
    unsupported, opens/closes a field gap, or flags the device as lost (then the rest
    of the tick's reads are skipped)."""

    def __init__(self, sampler: NvmlSampler | NvmlPcieSampler, device: _Device, ts: float) -> None:
        self.sampler = sampler
        self.device = device
        self.ts = ts
        self.rows: list[Sample] = []
        self.lost: str | None = None

    def one(self, metric: str, raw: str, read: Callable[[], float]) -> None:
        self.pair((metric,), raw, lambda: (read(),))

    def pair(self, metrics: Sequence[str], raw: str,
             read: Callable[[], Sequence[float]]) -> None:
        if self.lost is not None or all(m in self.device.unsupported for m in metrics):
            return
        try:
            values = read()
        except Exception as exc:
            self._failed(metrics, exc)
            return
        self._ok(metrics, values, raw, self.ts)

    def timed(self, metric: str, raw: str, read: Callable[[], float]) -> None:
        """A read that takes a measurable window: stamp it at the window's middle."""
        if self.lost is not None or metric in self.device.unsupported:
            return
        before = self.sampler.clock.now()
        try:
            value = read()
        except Exception as exc:
            self._failed((metric,), exc)
            return
        self._ok((metric,), (value,), raw, (before + self.sampler.clock.now()) / 2)

    def fields(self, handle: Any) -> None:
        wanted = [(fid, m) for fid, m in ((FI_POWER_INSTANT, "gpu_power_instant_w"),
                                          (FI_POWER_AVERAGE, "gpu_power_avg_w"))
                  if m not in self.device.unsupported]
        if self.lost is not None or not wanted:
            return
        try:
            results = self.sampler.api.field_values(handle, [fid for fid, _ in wanted])
        except Exception as exc:
            self._failed([m for _, m in wanted], exc)
            return
        for (fid, metric), result in zip(wanted, results, strict=True):
            if isinstance(result, BaseException):
                self._failed((metric,), result)
            else:
                self._ok((metric,), (result / 1000.0,), f"nvmlDeviceGetFieldValues({fid})", self.ts)

    def gpm(self, handle: Any) -> None:
        if self.lost is not None:
            return
        api = self.sampler.api
        try:
            current = api.gpm_sample(handle)
        except Exception as exc:
            self._failed(("gpm",), exc)
            return
        previous, self.device.gpm_previous = self.device.gpm_previous, current
        if previous is None:
            return
        ids = list(GPM_METRICS)
        try:
            results = api.gpm_metrics(previous, current, ids)
        except Exception as exc:
            self._failed(list(GPM_METRICS.values()), exc)
            return
        finally:
            _quietly(lambda: api.gpm_free(previous))
        for mid, result in zip(ids, results, strict=True):
            metric = GPM_METRICS[mid]
            if metric in self.device.unsupported:
                continue
            if isinstance(result, BaseException):
                self._failed((metric,), result)
            else:
                self._ok((metric,), (result,), f"nvmlGpmMetricsGet({mid})", self.ts)

    def _ok(self, metrics: Sequence[str], values: Sequence[float], raw: str, ts: float) -> None:
        gaps = self.sampler.gaps
        for metric, value in zip(metrics, values, strict=True):
            if metric in self.device.unsupported:
                continue
            self.rows.extend(gaps.present(ts, {**self.device.scope, "field": metric}))
            self.rows.append(Sample(ts, SOURCE, metric, float(value), self.device.labels, raw))

    def _failed(self, metrics: Sequence[str], exc: BaseException) -> None:
        code = getattr(exc, "value", None)
        reason = nvml_reason(exc)
        if code in DEVICE_LOST_CODES:
            self.lost = reason
            return
        if code in UNSUPPORTED_CODES:
            for metric in metrics:
                self.rows.extend(self.device.mark_unsupported(self.ts, metric, reason))
            return
        for metric in metrics:
            self.rows.extend(
                self.sampler.gaps.missing(self.ts, reason, {**self.device.scope, "field": metric})
            )


def nvml_reason(exc: BaseException) -> str:
    """NVML's own words for its errors ("Not Supported", "GPU is lost")."""
    if isinstance(exc, pynvml.NVMLError):
        try:
            return str(exc)
        except Exception:
            return f"NVML error {getattr(exc, 'value', '?')}"
    return describe_error(exc)


def _quietly(call: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        call()
