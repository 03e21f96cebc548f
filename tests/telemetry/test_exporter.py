"""`zerohop exporter` through a fake NVML: DCGM names out, canonical metrics back in."""

from __future__ import annotations

import pynvml
import pytest
from click.testing import CliRunner

from tests.telemetry.fakes import FakeNvml, wait_for
from zerohop.cli import cli
from zerohop.core.records import ClockAnchor
from zerohop.telemetry import exporter as exporter_module
from zerohop.telemetry.exporter import NvmlExporter
from zerohop.telemetry.prometheus import PromDeriver, parse_exposition
from zerohop.telemetry.samples import TelemetryClock
from zerohop.telemetry.scraper import PrometheusScraper


def scrape(port: int) -> dict[tuple[str, str], float]:
    import json

    scraper = PrometheusScraper(f"http://127.0.0.1:{port}/metrics",
                                TelemetryClock(ClockAnchor.now()), keep_raw=False)
    rows = scraper.tick(0.0)
    return {(r.metric, json.loads(r.labels).get("gpu", "")): r.value for r in rows}


@pytest.mark.integration
def test_served_metrics_read_back_as_the_canonical_ones() -> None:
    api = FakeNvml(gpus=2)
    exporter = NvmlExporter(api, host="127.0.0.1", port=0, interval_s=0.05)
    exporter.start()
    try:
        wanted = {("gpu_temp_c", "1"), ("gpu_sm_util_pct", "0"), ("gpu_mem_used_bytes", "1"),
                  ("gpu_power_w", "0"), ("gpu_sm_active_pct", "0"),
                  ("pcie_rx_bytes_per_s", "0"), ("gpu_throttle_reasons", "0")}
        wait_for(lambda: wanted <= scrape(exporter.port).keys(), "every metric sampled")
        values = scrape(exporter.port)
        assert values[("gpu_temp_c", "1")] == 41.0
        assert values[("gpu_sm_util_pct", "0")] == 50.0
        assert values[("gpu_mem_used_bytes", "1")] == pytest.approx(2e9)  # via MiB
        assert values[("gpu_power_w", "0")] == 300.0
        assert values[("gpu_sm_active_pct", "0")] == pytest.approx(2.0)  # via a 0–1 ratio
        assert values[("pcie_rx_bytes_per_s", "0")] == 1024.0 * 1000
        assert values[("gpu_throttle_reasons", "0")] == 4.0

        from zerohop.telemetry.scraper import Endpoint, fetch_text

        text = fetch_text(Endpoint.parse(f"http://127.0.0.1:{exporter.port}/metrics"), 2.0)
        assert "DCGM_FI_DEV_GPU_TEMP{Hostname=" in text  # DCGM exporter's labels
        assert 'gpu="1",modelName="Fake GPU 1"} 41.0' in text
        assert 'modelName="Fake GPU 1"' in text
        assert "zerohop_exporter_up 1.0" in text

        api.lost.add(1)  # a GPU falls off the bus: its values age out, the rest stay
        wait_for(lambda: ("gpu_temp_c", "1") not in scrape(exporter.port), "GPU 1 aged out")
        values = scrape(exporter.port)
        assert ("gpu_temp_c", "1") not in values
        assert values[("gpu_temp_c", "0")] == 40.0
    finally:
        exporter.stop()


@pytest.mark.integration  # binds a socket
def test_exposition_roundtrip_without_http() -> None:
    from prometheus_client import generate_latest

    api = FakeNvml(gpus=1)
    exporter = NvmlExporter(api, host="127.0.0.1", port=0, interval_s=1.0)
    try:
        from zerohop.telemetry.nvml import NvmlSampler

        sampler = NvmlSampler(api, exporter.clock)
        sampler.start(0.0)
        exporter.snapshot.add(sampler.tick(0.0))
        text = generate_latest(exporter.registry).decode()
    finally:
        exporter.server.server_close()
    rows = PromDeriver("prom:x:1", keep_raw=False).feed(1.0, parse_exposition(text))
    assert {r.metric for r in rows} >= {"gpu_temp_c", "gpu_mem_total_bytes", "pcie_link_gen",
                                        "gpu_power_instant_w", "gpu_mem_clock_mhz"}


class _NoNvml(FakeNvml):
    def __init__(self) -> None:
        super().__init__(init_error=pynvml.NVMLError_LibraryNotFound())


@pytest.mark.unit
def test_command_fails_clearly_without_nvml_and_warns_off_loopback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exporter_module, "PynvmlApi", _NoNvml)
    result = CliRunner().invoke(cli, ["exporter", "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 1
    assert "warning: listening on 0.0.0.0" in result.output
    assert "NVML not available: NVML Shared Library Not Found" in result.output


@pytest.mark.unit
def test_command_is_registered_with_its_options() -> None:
    result = CliRunner().invoke(cli, ["exporter", "--help"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--interval", "127.0.0.1", "9400"):
        assert option in result.output
