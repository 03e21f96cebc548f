"""On a machine with an NVIDIA GPU: the real NVML sampler, through the recorder's agent
process, while the GPU is busy; and `zerohop exporter` serving real readings."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from zerohop.core.records import ClockAnchor
from zerohop.telemetry.recorder import TelemetryRecorder
from zerohop.telemetry.spec import parse_telemetry_spec

pytestmark = pytest.mark.gpu


def _nvml_or_skip() -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except Exception as exc:
        pytest.skip(f"no NVIDIA GPU/driver here (NVML: {exc})")
    count = pynvml.nvmlDeviceGetCount()
    pynvml.nvmlShutdown()
    if count == 0:
        pytest.skip("NVML finds no GPU")


def _busy_gpu(seconds: float) -> threading.Thread | None:
    """Matmuls on the GPU for a while (torch or CuPy, whichever is installed)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None

        def work() -> None:
            a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
            end = time.time() + seconds
            while time.time() < end:
                for _ in range(20):
                    a @ a
                torch.cuda.synchronize()

    except ImportError:
        try:
            import cupy
        except ImportError:
            return None

        def work() -> None:
            a = cupy.random.random((8192, 8192), dtype=cupy.float32)
            end = time.time() + seconds
            while time.time() < end:
                for _ in range(5):
                    a @ a
                cupy.cuda.Device().synchronize()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_real_nvml_run_through_the_agent(tmp_path: Path) -> None:
    _nvml_or_skip()
    recorder = TelemetryRecorder(parse_telemetry_spec("nvml:interval=0.1"), tmp_path,
                                 anchor=ClockAnchor.now())
    t0 = time.time()
    recorder.start()
    time.sleep(1.0)
    load = _busy_gpu(2.5)
    time.sleep(3.0)
    if load is not None:
        load.join(10)
    df = pd.read_parquet(recorder.stop())
    t1 = time.time()
    print(df.groupby("metric").value.describe().to_string())
    print(df[df.metric.isin(["unsupported", "gap"])][["metric", "labels"]].to_string())
    nvml = df[df.source == "nvml"]
    assert not (nvml.metric == "gap").any(), nvml[nvml.metric == "gap"].labels.tolist()
    assert nvml.ts.between(t0, t1).all()
    values = {m: g.value for m, g in nvml.groupby("metric")}
    for metric in ("gpu_sm_util_pct", "gpu_mem_used_bytes", "gpu_mem_total_bytes",
                   "gpu_temp_c", "gpu_power_w", "gpu_sm_clock_mhz", "gpu_mem_clock_mhz",
                   "gpu_throttle_reasons", "pcie_link_gen", "pcie_link_width",
                   "pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s"):
        assert metric in values, f"{metric} missing; have {sorted(values)}"
    assert len(values["gpu_temp_c"]) >= 20  # ~10 Hz for 4 s
    assert values["gpu_mem_total_bytes"].min() > 1e9
    assert 5 < values["gpu_temp_c"].median() < 110
    assert values["gpu_power_w"].median() > 10
    assert values["pcie_link_width"].min() >= 1
    if load is not None:
        assert values["gpu_sm_util_pct"].max() >= 50  # the matmuls show
    unsupported = {json.loads(x)["field"] for x in nvml[nvml.metric == "unsupported"].labels}
    if "gpm" not in unsupported:  # Hopper: GPM figures over each interval
        assert "gpu_sm_active_pct" in values
        if load is not None:
            assert values["gpu_sm_active_pct"].max() > 10


def test_exporter_serves_real_readings() -> None:
    _nvml_or_skip()
    from zerohop.telemetry.exporter import NvmlExporter
    from zerohop.telemetry.nvml_api import PynvmlApi
    from zerohop.telemetry.samples import TelemetryClock
    from zerohop.telemetry.scraper import PrometheusScraper

    exporter = NvmlExporter(PynvmlApi(), host="127.0.0.1", port=0, interval_s=0.2)
    exporter.start()
    try:
        time.sleep(1.0)
        scraper = PrometheusScraper(f"http://127.0.0.1:{exporter.port}/metrics",
                                    TelemetryClock(), keep_raw=False)
        rows = scraper.tick(0.0)
    finally:
        exporter.stop()
    metrics = {r.metric for r in rows}
    print(sorted(metrics))
    assert {"gpu_temp_c", "gpu_power_w", "gpu_mem_used_bytes", "gpu_sm_clock_mhz"} <= metrics
