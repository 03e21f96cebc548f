"""The NVML reads zerohop makes, as a seam: `NvmlApi` lists them (plain numbers in,
plain numbers out, errors raised as `pynvml.NVMLError` subclasses) so tests can pass a
fake; `PynvmlApi` implements it on nvidia-ml-py, one NVML call per method."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pynvml


class NvmlApi(Protocol):
    """The NVML reads zerohop makes; errors are raised as pynvml.NVMLError subclasses."""

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def device_count(self) -> int: ...
    def device_handle(self, index: int) -> Any: ...
    def device_name(self, handle: Any) -> str: ...
    def utilization_rates(self, handle: Any) -> tuple[float, float]: ...  # gpu %, memory %
    def memory_info(self, handle: Any) -> tuple[float, float]: ...  # used, total bytes
    def temperature_c(self, handle: Any) -> float: ...
    def power_usage_w(self, handle: Any) -> float: ...
    def total_energy_j(self, handle: Any) -> float: ...  # since the driver loaded
    def field_values(self, handle: Any, field_ids: Sequence[int]
                     ) -> list[float | BaseException]: ...
    def clock_mhz(self, handle: Any, clock: int) -> float: ...
    def clocks_event_reasons(self, handle: Any) -> int: ...
    def pcie_link_generation(self, handle: Any) -> int: ...
    def pcie_link_width(self, handle: Any) -> int: ...
    def pcie_throughput_bytes_per_s(self, handle: Any, counter: int) -> float: ...
    def gpm_supported(self, handle: Any) -> bool: ...
    def gpm_sample(self, handle: Any) -> Any: ...
    def gpm_metrics(self, before: Any, after: Any, metric_ids: Sequence[int]
                    ) -> list[float | BaseException]: ...
    def gpm_free(self, sample: Any) -> None: ...


class PynvmlApi:
    """NvmlApi on nvidia-ml-py. Every method is one NVML call (plus unit conversion)."""

    def init(self) -> None:
        pynvml.nvmlInit()

    def shutdown(self) -> None:
        pynvml.nvmlShutdown()

    def device_count(self) -> int:
        return int(pynvml.nvmlDeviceGetCount())

    def device_handle(self, index: int) -> Any:
        return pynvml.nvmlDeviceGetHandleByIndex(index)

    def device_name(self, handle: Any) -> str:
        name = pynvml.nvmlDeviceGetName(handle)
        return name.decode() if isinstance(name, bytes) else str(name)

    def utilization_rates(self, handle: Any) -> tuple[float, float]:
        u = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return float(u.gpu), float(u.memory)

    def memory_info(self, handle: Any) -> tuple[float, float]:
        m = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return float(m.used), float(m.total)

    def temperature_c(self, handle: Any) -> float:
        return float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))

    def power_usage_w(self, handle: Any) -> float:
        return pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0

    def total_energy_j(self, handle: Any) -> float:
        return pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0  # mJ

    def field_values(self, handle: Any, field_ids: Sequence[int]) -> list[float | BaseException]:
        values = pynvml.nvmlDeviceGetFieldValues(handle, list(field_ids))
        out: list[float | BaseException] = []
        for v in values:
            if v.nvmlReturn != pynvml.NVML_SUCCESS:
                out.append(pynvml.NVMLError(v.nvmlReturn))
            else:
                out.append(_field_number(v))
        return out

    def clock_mhz(self, handle: Any, clock: int) -> float:
        return float(pynvml.nvmlDeviceGetClockInfo(handle, clock))

    def clocks_event_reasons(self, handle: Any) -> int:
        getter = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if getter is None:  # older nvidia-ml-py
            getter = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(getter(handle))

    def pcie_link_generation(self, handle: Any) -> int:
        return int(pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))

    def pcie_link_width(self, handle: Any) -> int:
        return int(pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle))

    def pcie_throughput_bytes_per_s(self, handle: Any, counter: int) -> float:
        return pynvml.nvmlDeviceGetPcieThroughput(handle, counter) * 1024.0  # KB/s

    def gpm_supported(self, handle: Any) -> bool:
        return bool(pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)

    def gpm_sample(self, handle: Any) -> Any:
        sample = pynvml.nvmlGpmSampleAlloc()
        try:
            pynvml.nvmlGpmSampleGet(handle, sample)
        except Exception:
            pynvml.nvmlGpmSampleFree(sample)
            raise
        return sample

    def gpm_metrics(self, before: Any, after: Any, metric_ids: Sequence[int]
                    ) -> list[float | BaseException]:
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(metric_ids)
        request.sample1 = before
        request.sample2 = after
        for i, mid in enumerate(metric_ids):
            request.metrics[i].metricId = mid
        pynvml.nvmlGpmMetricsGet(request)
        out: list[float | BaseException] = []
        for i in range(len(metric_ids)):
            m = request.metrics[i]
            if m.nvmlReturn != pynvml.NVML_SUCCESS:
                out.append(pynvml.NVMLError(m.nvmlReturn))
            else:
                out.append(float(m.value))
        return out

    def gpm_free(self, sample: Any) -> None:
        pynvml.nvmlGpmSampleFree(sample)


def _field_number(v: Any) -> float:
    kind = v.valueType
    union = v.value
    attr = {
        pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
        pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
    }.get(kind, "uiVal")
    return float(getattr(union, attr))
