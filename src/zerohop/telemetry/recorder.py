"""TelemetryRecorder: what the run calls at test start and at quit.

    recorder = TelemetryRecorder(parse_telemetry_spec("nvml,prom=URL,loadgen"), run_dir,
                                 anchor=process_anchor)
    recorder.start()          # on the master / local runner, in test_start
    ...
    path = recorder.stop()    # in quitting: flush, write run_dir/telemetry.parquet

Samplers run in a child agent process by default (`mode="process"`): no GIL shared with
the load generator and no gevent in sight. `mode="thread"` runs them in real OS threads
of this process instead (tests, or where spawning a process is not wanted); they never
block the hub, but parsing /metrics holds the GIL: on an H200 host, 32 streams, the
client's TTFT error p99 moved +0.09 ms with the agent process at 100 ms and +6.6 ms with
threads at 100 ms (tests/bench/bench_telemetry_overhead.py). Either way nothing blocks
gevent's hub except `stop()` waiting for the last flush. The event-loop lag probe is the
one piece that must live in this process, on its hub.

Locust workers on other hosts measure themselves (`loadgen.start_self_telemetry`), ship
`drain()`ed rows in their reports, and the master passes them to `add_samples`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import zerohop
from zerohop.core.layout import TELEMETRY_FILE
from zerohop.core.records import ClockAnchor
from zerohop.telemetry.client_process import (
    LoopLagProbe,
    gevent_is_patched,
    loadgen_source,
    start_gevent_loop_lag_probe,
    start_thread_lag_probe,
)
from zerohop.telemetry.nvml_api import NvmlApi
from zerohop.telemetry.samples import Sample, TelemetryClock
from zerohop.telemetry.sampling_agent import AgentConfig, TelemetryAgent
from zerohop.telemetry.spec import LoadgenSource, PromSource, SourceSpec
from zerohop.telemetry.store import (
    COLUMNS,
    SampleSink,
    consolidate_telemetry,
    telemetry_schema,
)

STOP_TIMEOUT_S = 10.0


class TelemetryRecorder:
    """Start/stop every telemetry source of one run; output `out_dir/telemetry.parquet`."""

    def __init__(self, sources: Sequence[SourceSpec], out_dir: Path, *,
                 anchor: ClockAnchor | None = None,
                 mode: Literal["process", "thread"] = "process",
                 nvml_api: NvmlApi | None = None, defer_loop_lag: bool = False) -> None:
        for source in sources:
            if isinstance(source, PromSource) and source.url is None:
                raise ValueError("telemetry: `prom` without a URL: resolve it with "
                                 "spec.with_target_url(sources, target_metrics_url)")
        if nvml_api is not None and mode != "thread":
            raise ValueError("telemetry: a fake nvml_api only works with mode='thread'")
        self.sources = list(sources)
        self.out_dir = Path(out_dir)
        self.clock = TelemetryClock(anchor)
        self.mode = mode
        self._nvml_api = nvml_api
        self._loadgen = next((s for s in self.sources if isinstance(s, LoadgenSource)), None)
        self._pids: list[int] = [os.getpid()] if self._loadgen else []
        self._agent: TelemetryAgent | None = None
        self._child: subprocess.Popen[str] | None = None
        self._probe: LoopLagProbe | None = None
        self._probe_sink: SampleSink | None = None
        self._remote_sink: SampleSink | None = None
        self.started = False
        self.stopped = False
        self.defer_loop_lag = defer_loop_lag  # the caller starts the probe: start_loop_lag

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        if self.started:
            return
        self.started = True
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.sources:
            if self.mode == "thread":
                self._start_thread_agent(self.sources)
            else:
                self._start_child_agent(self.sources)
        if not self.defer_loop_lag:
            self.start_loop_lag()

    def start_loop_lag(self) -> None:
        """Start the event-loop lag probe (on this thread's hub). With `defer_loop_lag`
        the run calls it when its measured window begins: the set-up before (reading
        traces, planning, imports) holds the hub but delays no request."""
        if self._probe is None and not self.stopped and self._loadgen is not None \
                and self._loadgen.loop_lag:
            self._start_lag_probe()

    def stop_loop_lag(self) -> None:
        """End the probe when the measured window ends (stop() does it otherwise)."""
        probe, self._probe = self._probe, None
        if probe is not None:
            rows = probe.stop()
            if self._probe_sink is not None:
                self._probe_sink.add(rows)
                self._probe_sink.close()

    def add_samples(self, rows: Iterable[Sample | Sequence[Any]]) -> None:
        """Rows measured elsewhere (a Locust worker's loop lag and CPU, shipped to the
        master as plain lists in COLUMNS order). Call from one thread (the hub)."""
        if self._remote_sink is None:
            self._remote_sink = SampleSink(self.out_dir, "remote")
        self._remote_sink.add(r if isinstance(r, Sample) else _sample_of(r) for r in rows)

    def stop(self) -> Path:
        """Stop every source, flush, write and return `out_dir/telemetry.parquet`."""
        if not self.stopped:
            self.stop_loop_lag()
            self.stopped = True
            if self._agent is not None:
                self._agent.stop(STOP_TIMEOUT_S)
            if self._child is not None:
                self._stop_child()
            if self._remote_sink is not None:
                self._remote_sink.close()
        out = consolidate_telemetry(self.out_dir)
        if out is None:  # nothing was recorded: still leave the file the run promises
            out = self.out_dir / TELEMETRY_FILE
            _write_empty(out)
        return out

    # --- helpers ----------------------------------------------------------------------------
    def _start_thread_agent(self, sources: list[SourceSpec]) -> None:
        kwargs: dict[str, Any] = {"loadgen_pids": self._pids}
        if self._nvml_api is not None:
            api = self._nvml_api
            kwargs["nvml_api_factory"] = lambda: api
        self._agent = TelemetryAgent(sources, self.out_dir, self.clock, **kwargs)
        self._agent.start()

    def _start_child_agent(self, sources: list[SourceSpec]) -> None:
        config = AgentConfig(
            run_dir=str(self.out_dir),
            anchor_wall_ns=self.clock.anchor.wall_ns,
            anchor_perf_ns=self.clock.anchor.perf_ns,
            sources=sources,
            loadgen_pids=self._pids,
        )
        env = dict(os.environ)
        # the folder this process imported zerohop from, so the child runs the same code
        import_root = str(Path(next(iter(zerohop.__path__))).parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (import_root, env.get("PYTHONPATH")) if p)
        self._child = subprocess.Popen(
            [sys.executable, "-m", "zerohop.telemetry.sampling_agent"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
        )
        self._send(config.model_dump_json())

    def _send(self, line: str) -> None:
        child = self._child
        if child is None or child.stdin is None or child.poll() is not None:
            return
        try:
            child.stdin.write(line + "\n")
            child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def _stop_child(self) -> None:
        child = self._child
        assert child is not None
        self._send("stop")
        try:
            if child.stdin is not None:
                child.stdin.close()
        except OSError:
            pass
        try:
            child.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.terminate()
            try:
                child.wait(2.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _start_lag_probe(self) -> None:
        source = loadgen_source(os.getpid())
        sink = SampleSink(self.out_dir, "looplag")
        self._probe_sink = sink
        if gevent_is_patched():
            self._probe = start_gevent_loop_lag_probe(source, self.clock, on_rows=sink.add)
        else:
            self._probe = start_thread_lag_probe(source, self.clock, on_rows=sink.add)


def _sample_of(row: Sequence[Any]) -> Sample:
    if len(row) != len(COLUMNS):
        raise ValueError(f"telemetry row needs {len(COLUMNS)} columns {COLUMNS}: {row!r}")
    ts, source, metric, labels, value, raw = row
    return Sample(float(ts), str(source), str(metric),
                  float("nan") if value is None else float(value), str(labels),
                  None if raw is None else str(raw))


def _write_empty(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({n: [] for n in COLUMNS}, schema=telemetry_schema()), path)
