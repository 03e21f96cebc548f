"""The telemetry agent: every sampler in its own real thread, each with its own sink.

It runs either inside the calling process (`TelemetryAgent`, real OS threads) or, by
default, as a child process (`python -m zerohop.telemetry.sampling_agent`) so that parsing
/metrics and NVML calls never hold the load generator's GIL. The child reads one JSON
config line on stdin, then waits for `stop`; end of stdin also means stop, so a parent
killed with -9 never leaves an agent behind. The child stamps samples with the parent's
ClockAnchor (perf_counter is system-wide), so both processes share one timeline.
"""

from __future__ import annotations

import functools
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from zerohop.core.records import ClockAnchor
from zerohop.telemetry.client_process import ProcessSampler
from zerohop.telemetry.loop import Sampler, run_sampler_loop
from zerohop.telemetry.nvml import NvmlPcieSampler, NvmlSampler
from zerohop.telemetry.nvml_api import NvmlApi, PynvmlApi
from zerohop.telemetry.realthreads import RealThread, StopSignal
from zerohop.telemetry.samples import TelemetryClock
from zerohop.telemetry.scraper import PrometheusScraper
from zerohop.telemetry.spec import LoadgenSource, NvmlSource, PromSource, SourceSpec
from zerohop.telemetry.store import SampleSink

JOIN_TIMEOUT_S = 5.0


class AgentConfig(BaseModel):
    """What the child agent needs, sent as one JSON line."""

    model_config = ConfigDict(extra="forbid")

    run_dir: str
    anchor_wall_ns: int
    anchor_perf_ns: int
    sources: list[SourceSpec]
    loadgen_pids: list[int] = []


class TelemetryAgent:
    """Builds the samplers for `sources` and runs each in a real thread until `stop()`."""

    def __init__(self, sources: Sequence[SourceSpec], run_dir: Path, clock: TelemetryClock, *,
                 loadgen_pids: Sequence[int] = (),
                 nvml_api_factory: Callable[[], NvmlApi] = PynvmlApi) -> None:
        self.run_dir = run_dir
        self.clock = clock
        self.samplers: list[Sampler] = []
        for source in sources:
            self.samplers.extend(self._build(source, list(loadgen_pids), nvml_api_factory))
        self._stop = StopSignal()
        self._threads: list[RealThread] = []

    def start(self) -> None:
        for sampler in self.samplers:
            sink = SampleSink(self.run_dir, sampler.name)
            thread = RealThread(
                functools.partial(run_sampler_loop, sampler, sink, self.clock, self._stop),
                f"zerohop-telemetry-{sampler.name}",
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = JOIN_TIMEOUT_S) -> bool:
        """Stop every loop and wait for their final flush; False if one hung."""
        self._stop.set()
        return all(thread.join(timeout_s) for thread in self._threads)

    def _build(self, source: SourceSpec, pids: list[int],
               nvml_api_factory: Callable[[], NvmlApi]) -> list[Sampler]:
        if isinstance(source, NvmlSource):
            api = nvml_api_factory()
            built: list[Sampler] = [
                NvmlSampler(api, self.clock, interval_s=source.interval_s, gpm=source.gpm)
            ]
            if source.pcie:
                built.append(NvmlPcieSampler(
                    api, self.clock, interval_s=source.pcie_interval_s or source.interval_s))
            return built
        if isinstance(source, PromSource):
            if source.url is None:
                raise ValueError("telemetry: a bare `prom` source needs the target's URL "
                                 "(spec.with_target_url)")
            return [PrometheusScraper(source.url, self.clock, interval_s=source.interval_s,
                                      timeout_s=source.timeout_s, keep_raw=source.raw)]
        if isinstance(source, LoadgenSource):
            return [ProcessSampler(pids, self.clock, interval_s=source.interval_s)]
        raise TypeError(f"unknown telemetry source {source!r}")


def main() -> int:
    """Child-process entry: config line, then run until `stop` or EOF on stdin."""
    config = AgentConfig.model_validate_json(sys.stdin.readline())
    clock = TelemetryClock(ClockAnchor(wall_ns=config.anchor_wall_ns,
                                       perf_ns=config.anchor_perf_ns))
    agent = TelemetryAgent(config.sources, Path(config.run_dir), clock,
                           loadgen_pids=config.loadgen_pids)
    signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent; it stops us
    agent.start()
    print(json.dumps({"ready": True, "samplers": [s.name for s in agent.samplers]}), flush=True)
    for line in sys.stdin:
        if line.split()[:1] == ["stop"]:
            break
    return 0 if agent.stop() else 1


if __name__ == "__main__":
    sys.exit(main())
