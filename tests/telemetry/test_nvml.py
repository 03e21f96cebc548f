"""NVML sampling through the seam: normal reads, unsupported fields, a GPU that
disappears and comes back, a missing library."""

from __future__ import annotations

import json
import math

import pynvml
import pytest

from tests.telemetry.fakes import FakeNvml
from zerohop.core.records import ClockAnchor
from zerohop.telemetry.nvml import NvmlPcieSampler, NvmlSampler
from zerohop.telemetry.samples import GAP, UNSUPPORTED, Sample, TelemetryClock

pytestmark = pytest.mark.unit

ALL_FAST = {
    "gpu_sm_util_pct", "gpu_mem_util_pct", "gpu_mem_used_bytes", "gpu_mem_total_bytes",
    "gpu_temp_c", "gpu_power_w", "gpu_energy_j", "gpu_power_instant_w", "gpu_power_avg_w",
    "gpu_sm_clock_mhz", "gpu_mem_clock_mhz", "gpu_throttle_reasons", "pcie_link_gen",
    "pcie_link_width",
}
GPM = {"gpu_sm_active_pct", "gpu_sm_occupancy_pct", "gpu_tensor_active_pct",
       "gpu_dram_active_pct"}


def clock() -> TelemetryClock:
    return TelemetryClock(ClockAnchor.now())


def by_gpu(rows: list[Sample], gpu: str) -> dict[str, float]:
    return {r.metric: r.value for r in rows if json.loads(r.labels).get("gpu") == gpu
            and r.metric not in (GAP, UNSUPPORTED)}


def test_reads_every_field_of_every_gpu_with_units() -> None:
    api = FakeNvml(gpus=2)
    sampler = NvmlSampler(api, clock())
    assert sampler.start(0.0) == []
    first = sampler.tick(0.1)
    assert set(by_gpu(first, "0")) == ALL_FAST  # GPM needs two samples
    second = sampler.tick(0.2)
    gpu1 = by_gpu(second, "1")
    assert set(gpu1) == ALL_FAST | GPM
    assert gpu1["gpu_sm_util_pct"] == 51.0
    assert gpu1["gpu_mem_used_bytes"] == 2e9
    assert gpu1["gpu_power_instant_w"] == pytest.approx(250.186)  # mW → W
    assert gpu1["gpu_power_avg_w"] == pytest.approx(250.185)
    assert gpu1["gpu_throttle_reasons"] == 4.0
    assert gpu1["gpu_sm_active_pct"] == 2.0  # the fake returns the GPM metric id
    assert all(r.source == "nvml" and r.ts == 0.2 for r in second)
    assert next(r for r in second if r.metric == "gpu_temp_c").raw_metric == \
        "nvmlDeviceGetTemperature"
    sampler.close(0.3)
    assert api.gpm_freed == api.gpm_samples  # every GPM sample released
    assert api.shutdowns == api.inits


def test_energy_is_the_driver_counter_in_joules_and_unsupported_once() -> None:
    api = FakeNvml(gpus=2)
    sampler = NvmlSampler(api, clock())
    sampler.start(0.0)
    rows = [r for t in range(3) for r in sampler.tick(t * 0.1)]
    energy = [r for r in rows if r.metric == "gpu_energy_j"]
    # the fake's counter: 1000 J × (gpu + 1) plus 10 J a call (mJ → J in PynvmlApi)
    assert [r.value for r in energy if json.loads(r.labels)["gpu"] == "1"] == [
        2020.0, 2040.0, 2060.0]
    assert energy[0].raw_metric == "nvmlDeviceGetTotalEnergyConsumption"
    # a pre-Volta GPU has no counter: one `unsupported` row, then never asked again
    old = FakeNvml(gpus=1)
    old.fail[(0, "total_energy_j")] = pynvml.NVMLError_NotSupported()
    sampler = NvmlSampler(old, clock())
    sampler.start(0.0)
    rows = [r for t in range(5) for r in sampler.tick(t * 0.1)]
    assert [json.loads(r.labels)["field"] for r in rows if r.metric == UNSUPPORTED] == [
        "gpu_energy_j"]
    assert old.calls["total_energy_j"] == 1
    assert not [r for r in rows if r.metric in ("gpu_energy_j", GAP)]
    assert len([r for r in rows if r.metric == "gpu_power_w"]) == 5


def test_unsupported_field_is_recorded_once_and_not_asked_again() -> None:
    api = FakeNvml(gpus=1)
    api.fail[(0, "temperature_c")] = pynvml.NVMLError_NotSupported()
    api.field_errors[185] = pynvml.NVMLError_NotSupported()  # no averaged power
    sampler = NvmlSampler(api, clock())
    sampler.start(0.0)
    rows = [r for t in range(10) for r in sampler.tick(t * 0.1)]
    unsupported = [json.loads(r.labels) for r in rows if r.metric == UNSUPPORTED]
    assert sorted(u["field"] for u in unsupported) == ["gpu_power_avg_w", "gpu_temp_c"]
    assert all(u["reason"] == "Not Supported" and u["gpu"] == "0" for u in unsupported)
    assert api.calls["temperature_c"] == 1
    assert not [r for r in rows if r.metric in ("gpu_temp_c", "gpu_power_avg_w")]
    assert len([r for r in rows if r.metric == "gpu_power_instant_w"]) == 10
    assert not [r for r in rows if r.metric == GAP]


def test_lost_gpu_is_a_gap_while_the_others_go_on_and_recovery_closes_it() -> None:
    api = FakeNvml(gpus=2)
    sampler = NvmlSampler(api, clock())
    sampler.start(0.0)
    sampler.tick(0.0)
    api.lost.add(1)
    rows = [r for t in (1.0, 1.1, 1.2, 1.5) for r in sampler.tick(t)]
    gaps = [r for r in rows if r.metric == GAP]
    assert len(gaps) == 1  # one episode, not one row per tick
    assert json.loads(gaps[0].labels) == {"gpu": "1", "reason": "GPU is lost"}
    assert math.isnan(gaps[0].value) and gaps[0].ts == 1.0
    assert len([r for r in rows if r.metric == "gpu_temp_c"]) == 4  # GPU 0 unaffected
    assert not by_gpu([r for r in rows if r.ts > 1.0], "1")
    calls_while_lost = api.calls["utilization_rates"]
    sampler.tick(1.6)  # < 1 s after the loss: not even retried
    assert api.calls["utilization_rates"] == calls_while_lost + 1  # GPU 0 only

    api.lost.discard(1)
    back = sampler.tick(2.1)
    closing = [r for r in back if r.metric == GAP]
    assert len(closing) == 1 and closing[0].ts == 1.0
    assert closing[0].value == pytest.approx(1.1)
    assert by_gpu(back, "1")["gpu_temp_c"] == 41.0


def test_transient_error_is_a_field_gap_until_it_reads_again() -> None:
    api = FakeNvml(gpus=1)
    sampler = NvmlSampler(api, clock())
    sampler.start(0.0)
    api.fail[(0, "power_usage_w")] = pynvml.NVMLError_Unknown()
    rows = sampler.tick(1.0) + sampler.tick(2.0)
    del api.fail[(0, "power_usage_w")]
    rows += sampler.tick(3.0)
    gaps = [r for r in rows if r.metric == GAP]
    assert [(g.ts, g.value) for g in gaps][-1] == (1.0, 2.0)
    assert json.loads(gaps[0].labels) == {"field": "gpu_power_w", "gpu": "0",
                                          "reason": "Unknown Error"}
    assert [r.ts for r in rows if r.metric == "gpu_power_w"] == [3.0]


def test_no_library_is_one_gap_for_the_run_and_nothing_raises() -> None:
    api = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound())
    sampler = NvmlSampler(api, clock())
    opened = sampler.start(10.0)
    assert [json.loads(r.labels)["reason"] for r in opened] == [
        "NVML not available: NVML Shared Library Not Found"]
    assert sampler.tick(10.1) == []
    closed = sampler.close(15.0)
    assert [(r.metric, r.ts, r.value) for r in closed] == [(GAP, 10.0, 5.0)]


def test_real_pynvml_without_a_driver_is_a_gap() -> None:
    from zerohop.telemetry.nvml_api import PynvmlApi

    sampler = NvmlSampler(PynvmlApi(), clock())
    rows = sampler.start(0.0)
    if sampler.available:
        pytest.skip("this machine has a working NVML; see test_gpu_real.py")
    assert rows[0].metric == GAP
    assert json.loads(rows[0].labels)["reason"].startswith("NVML not available: ")


def test_gpm_not_supported_is_one_unsupported_row() -> None:
    api = FakeNvml(gpus=1)
    api.gpm_support = False
    sampler = NvmlSampler(api, clock())
    rows = sampler.start(0.0) + sampler.tick(0.1) + sampler.tick(0.2)
    assert [json.loads(r.labels)["field"] for r in rows if r.metric == UNSUPPORTED] == ["gpm"]
    assert not GPM & {r.metric for r in rows}


def test_pcie_sampler_stamps_the_middle_of_its_window() -> None:
    api = FakeNvml(gpus=2)
    c = clock()
    sampler = NvmlPcieSampler(api, c)
    sampler.start(0.0)
    before = c.now()
    rows = sampler.tick(before)
    after = c.now()
    assert {(r.metric, json.loads(r.labels)["gpu"]) for r in rows} == {
        (m, g) for m in ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s") for g in ("0", "1")}
    assert all(before <= r.ts <= after for r in rows)
    assert next(r.value for r in rows if r.metric == "pcie_rx_bytes_per_s") == 1024.0 * 1000
    api.lost.add(0)
    rows = sampler.tick(c.now())
    assert {json.loads(r.labels)["gpu"] for r in rows} == {"1"}
    assert not [r for r in rows if r.metric == GAP]  # the main sampler reports the loss
