"""`zerohop exporter`: this machine's NVML metrics as a Prometheus `/metrics` page.

For GPU hosts without a DCGM exporter: run it next to the engine, then point the run at
it (`--telemetry prom=http://gpu-host:9400/metrics`). It serves DCGM-exporter names and
units (see `canonical.DCGM_EXPORT`), so the scraper's canonical mapping, and any DCGM
dashboard, read it unchanged. Sampling happens in real threads at `--interval`; a scrape
only renders the latest values, and a value older than a few intervals (a lost GPU, an
unsupported field) is left out rather than served stale.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from zerohop.telemetry.canonical import DCGM_EXPORT
from zerohop.telemetry.loop import Sampler, run_sampler_loop
from zerohop.telemetry.nvml import NvmlPcieSampler, NvmlSampler, nvml_reason
from zerohop.telemetry.nvml_api import NvmlApi, PynvmlApi
from zerohop.telemetry.realthreads import RealThread, StopSignal, real_lock
from zerohop.telemetry.samples import GAP, UNSUPPORTED, Sample, TelemetryClock

LOOPBACK = ("127.0.0.1", "::1", "localhost")
STALE_INTERVALS = 5


class Snapshot:
    """Latest value per (canonical metric, gpu), written by sampler threads (RowSink)."""

    def __init__(self) -> None:
        self._lock = real_lock()
        self._values: dict[tuple[str, str], tuple[float, float]] = {}  # -> (monotonic, value)

    def add(self, samples: Iterable[Sample]) -> None:
        now = time.monotonic()
        fresh = {}
        for s in samples:
            if s.metric in (GAP, UNSUPPORTED) or s.metric not in DCGM_EXPORT:
                continue
            fresh[(s.metric, s.labels)] = (now, s.value)
        with self._lock:
            self._values.update(fresh)

    def flush_if_due(self) -> None:
        pass

    def close(self) -> None:
        pass

    def latest(self, max_age_s: float) -> list[tuple[str, str, float]]:
        cutoff = time.monotonic() - max_age_s
        with self._lock:
            items = list(self._values.items())
        return [(metric, labels, value) for (metric, labels), (at, value) in items if at >= cutoff]


class DcgmStyleCollector(Collector):
    """Renders a Snapshot under DCGM exporter names, with its usual labels."""

    def __init__(self, snapshot: Snapshot, gpu_names: dict[str, str], max_age_s: float) -> None:
        self.snapshot = snapshot
        self.gpu_names = gpu_names
        self.max_age_s = max_age_s
        self.hostname = socket.gethostname()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        import json

        families: dict[str, GaugeMetricFamily] = {}
        for metric, labels, value in sorted(self.snapshot.latest(self.max_age_s)):
            name, factor = DCGM_EXPORT[metric]
            family = families.get(name)
            if family is None:
                family = GaugeMetricFamily(name, f"{metric} from NVML (zerohop exporter)",
                                           labels=["gpu", "modelName", "Hostname"])
                families[name] = family
            gpu = json.loads(labels).get("gpu", "")
            family.add_metric([gpu, self.gpu_names.get(gpu, ""), self.hostname], value * factor)
        up = GaugeMetricFamily("zerohop_exporter_up", "1 while the exporter samples NVML")
        up.add_metric([], 1.0)
        yield up
        yield from families.values()


class NvmlExporter:
    """Sampler threads + an HTTP server; `serve_forever` or start/stop around a test."""

    def __init__(self, api: NvmlApi, *, host: str = "127.0.0.1", port: int = 9400,
                 interval_s: float = 1.0) -> None:
        self.api = api
        self.interval_s = interval_s
        self.clock = TelemetryClock()
        self.snapshot = Snapshot()
        api.init()  # fail here, loudly, on a host without NVML
        self.gpu_names = self._gpu_names()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(
            DcgmStyleCollector(self.snapshot, self.gpu_names, STALE_INTERVALS * interval_s + 1.0)
        )
        self.server = ThreadingHTTPServer((host, port), _handler_for(self.registry))
        self.server.daemon_threads = True
        self._stop = StopSignal()
        self._threads: list[RealThread] = []

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        samplers: list[Sampler] = [
            NvmlSampler(self.api, self.clock, interval_s=self.interval_s),
            NvmlPcieSampler(self.api, self.clock, interval_s=self.interval_s),
        ]
        for sampler in samplers:
            thread = RealThread(
                functools.partial(run_sampler_loop, sampler, self.snapshot, self.clock,
                                  self._stop),
                f"zerohop-exporter-{sampler.name}",
            )
            thread.start()
            self._threads.append(thread)
        http_thread = RealThread(self.server.serve_forever, "zerohop-exporter-http")
        http_thread.start()
        self._threads.append(http_thread)

    def stop(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
        for thread in self._threads:
            thread.join(5.0)
        with contextlib.suppress(Exception):
            self.api.shutdown()

    def _gpu_names(self) -> dict[str, str]:
        names = {}
        try:
            for index in range(self.api.device_count()):
                names[str(index)] = self.api.device_name(self.api.device_handle(index))
        except Exception as exc:
            print(f"zerohop exporter: cannot read GPU names: {nvml_reason(exc)}", file=sys.stderr)
        return names


def _handler_for(registry: CollectorRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/metrics":
                body = generate_latest(registry)
                self._reply(200, CONTENT_TYPE_LATEST, body)
            elif self.path == "/":
                self._reply(200, "text/plain; charset=utf-8",
                            b"zerohop exporter: NVML metrics at /metrics\n")
            else:
                self._reply(404, "text/plain; charset=utf-8", b"not found\n")

        def _reply(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per scrape would drown the operator's terminal

    return Handler


@click.command("exporter")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback exposes GPU metrics to the "
              "network: do it only on a trusted network.")
@click.option("--port", default=9400, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (9400 is the DCGM exporter's).")
@click.option("--interval", "interval_s", default=1.0, show_default=True,
              type=click.FloatRange(min=0.01, max=60.0), help="Seconds between NVML samples.")
def exporter_command(host: str, port: int, interval_s: float) -> None:
    """Serve this machine's NVML metrics at /metrics, with DCGM exporter names."""
    if host not in LOOPBACK:
        click.echo(f"warning: listening on {host}: GPU metrics are visible to the network",
                   err=True)
    try:
        exporter = NvmlExporter(PynvmlApi(), host=host, port=port, interval_s=interval_s)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None
    except Exception as exc:
        raise click.ClickException(f"NVML not available: {nvml_reason(exc)}") from None
    exporter.start()
    click.echo(f"zerohop exporter: http://{host}:{exporter.port}/metrics "
               f"({len(exporter.gpu_names)} GPU(s), every {interval_s:g} s); Ctrl-C stops",
               err=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        exporter.stop()
