"""TelemetryRecorder end to end: threads and the agent process, one timeline, a server
killed mid-run, a parent killed with -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.telemetry.fakes import FakeNvml, MetricsServer, vllm_text, wait_for
from zerohop.core.layout import TELEMETRY_DIR
from zerohop.core.records import ClockAnchor
from zerohop.telemetry.recorder import TelemetryRecorder
from zerohop.telemetry.spec import parse_telemetry_spec
from zerohop.telemetry.store import consolidate_telemetry

pytestmark = pytest.mark.integration


def render_queue(box: dict[str, float]) -> str:
    return vllm_text(waiting=box["waiting"], running=1, kv=0.1, prompt_total=box["prompt"],
                     gen_total=0, preempt_total=0, ttft_buckets={"1.0": 0, "+Inf": 0})


def read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def test_thread_mode_all_sources_one_clock_and_a_killed_server(tmp_path: Path) -> None:
    box = {"waiting": 3.0, "prompt": 0.0}
    server = MetricsServer(lambda: render_queue(box))
    anchor = ClockAnchor.now()
    sources = parse_telemetry_spec(
        f"nvml:interval=0.05,prom={server.url}:interval=0.05:timeout=0.5,loadgen:interval=0.1")
    nvml_api = FakeNvml(gpus=2)
    recorder = TelemetryRecorder(sources, tmp_path, anchor=anchor, mode="thread",
                                 nvml_api=nvml_api)
    wall_start = time.time()
    recorder.start()
    wait_for(lambda: server.requests >= 6 and nvml_api.calls.get("pcie_throughput", 0) >= 8,
             "six scrapes and two PCIe rounds")
    server.stop()  # the engine dies mid-run
    temperatures = nvml_api.calls["temperature_c"]
    # the other sources go on meanwhile: eight more NVML rounds (0.4 s) over both GPUs
    wait_for(lambda: nvml_api.calls["temperature_c"] >= temperatures + 16,
             "NVML samples after the engine died")
    stop_called = time.time()
    out = recorder.stop()
    wall_end = time.time()

    df = read(out)
    assert out == tmp_path / "telemetry.parquet"
    sources_seen = set(df["source"])
    prom = f"prom:127.0.0.1:{server.port}"
    assert {"nvml", prom, f"prom-raw:127.0.0.1:{server.port}",
            f"loadgen:{os.uname().nodename}:{os.getpid()}"} <= sources_seen
    # one timeline: every sample's wall time lies within the run
    assert df["ts"].between(wall_start - 0.01, wall_end + 0.01).all()
    queue = df[(df.source == prom) & (df.metric == "queue_depth")]
    assert len(queue) >= 5 and (queue.value == 3.0).all()
    gaps = df[(df.source == prom) & (df.metric == "gap")]
    assert len(gaps) == 1
    # refused, or reset when the server died during a scrape
    assert json.loads(gaps.labels.iloc[0])["reason"] in ("connection refused", "connection reset")
    # the gap starts after the last good scrape and lasts until the run ended
    assert gaps.ts.iloc[0] > queue.ts.max()
    # (bounds, not a point: stop() itself can take a while on a loaded machine)
    assert stop_called - gaps.ts.iloc[0] - 0.2 <= gaps.value.iloc[0]
    assert gaps.value.iloc[0] <= wall_end - gaps.ts.iloc[0] + 0.05
    # the other sources went on during the gap
    nvml = df[(df.source == "nvml") & (df.metric == "gpu_temp_c")]
    assert (nvml.ts > gaps.ts.iloc[0] + 0.2).any()
    assert set(nvml.labels.map(lambda s: json.loads(s)["gpu"])) == {"0", "1"}
    assert len(df[df.metric == "pcie_rx_bytes_per_s"]) >= 2
    lag = df[df.metric == "loadgen_loop_lag_ms"]
    assert set(lag.labels.map(lambda s: json.loads(s)["stat"])) == {"mean", "p99", "max"}
    assert (df[df.metric == "loadgen_rss_bytes"].value > 10e6).all()


def test_worker_rows_arrive_through_add_samples(tmp_path: Path) -> None:
    recorder = TelemetryRecorder([], tmp_path, mode="thread")
    recorder.start()
    recorder.add_samples([[123.0, "loadgen:w1:77", "loadgen_cpu_pct", "{}", 42.0, None]])
    df = read(recorder.stop())
    assert len(df) == 1
    row = df.iloc[0]
    assert (row.ts, row.source, row.metric, row.labels, row.value) == (
        123.0, "loadgen:w1:77", "loadgen_cpu_pct", "{}", 42.0)
    assert pd.isna(row.raw_metric)


def test_no_sources_still_leaves_an_empty_file(tmp_path: Path) -> None:
    recorder = TelemetryRecorder(parse_telemetry_spec("none"), tmp_path)
    recorder.start()
    df = read(recorder.stop())
    assert list(df.columns) == ["ts", "source", "metric", "labels", "value", "raw_metric"]
    assert df.empty


def test_bare_prom_must_be_resolved_first(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="with_target_url"):
        TelemetryRecorder(parse_telemetry_spec("prom"), tmp_path)


def test_agent_process_samples_on_the_parents_clock(tmp_path: Path) -> None:
    box = {"waiting": 7.0, "prompt": 0.0}
    server = MetricsServer(lambda: render_queue(box))
    try:
        sources = parse_telemetry_spec(f"nvml,prom={server.url}:interval=0.1,loadgen:interval=0.2")
        # an anchor whose wall clock is 1000 s off proves the child uses ours, not its own
        real = ClockAnchor.now()
        anchor = ClockAnchor(wall_ns=real.wall_ns - 1000 * 10**9, perf_ns=real.perf_ns)
        recorder = TelemetryRecorder(sources, tmp_path, anchor=anchor)
        recorder.start()
        child = recorder._child
        assert child is not None
        t0 = time.time() - 1000
        _wait_for_rows(tmp_path, "prom", timeout_s=20)
        out = recorder.stop()
        t1 = time.time() - 1000
        assert child.poll() == 0  # stopped cleanly, not killed
    finally:
        server.stop()
    df = read(out)
    queue = df[df.metric == "queue_depth"]
    assert len(queue) >= 1 and (queue.value == 7.0).all()
    assert queue.ts.between(t0, t1).all()
    nvml = df[df.source == "nvml"]
    gap = nvml[nvml.metric == "gap"]
    if len(gap):  # a CPU machine: one gap for the whole run, with the reason
        assert len(gap) == 1
        assert json.loads(gap.labels.iloc[0])["reason"].startswith("NVML not available")
        assert gap.value.iloc[0] > 0
    else:  # a GPU machine
        assert (nvml.metric == "gpu_temp_c").any()
    assert (df.source == f"loadgen:{os.uname().nodename}:{os.getpid()}").any()


def test_parent_killed_minus_9_leaves_consolidatable_data_and_no_orphan(tmp_path: Path) -> None:
    box = {"waiting": 1.0, "prompt": 0.0}
    server = MetricsServer(lambda: render_queue(box))
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from zerohop.telemetry.recorder import TelemetryRecorder
        from zerohop.telemetry.spec import parse_telemetry_spec
        r = TelemetryRecorder(parse_telemetry_spec("prom={server.url}:interval=0.1"),
                              Path({str(tmp_path)!r}))
        r.start()
        print("started", flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        agent = psutil.Process(parent.pid).children()[0]
        _wait_for_rows(tmp_path, "prom", timeout_s=20)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        agent.wait(10)  # stdin closed → the agent flushes and exits on its own
    finally:
        if parent.poll() is None:
            parent.kill()
        server.stop()
    out = consolidate_telemetry(tmp_path)
    assert out is not None
    df = read(out)
    assert (df.metric == "queue_depth").sum() >= 1


def _wait_for_rows(run_dir: Path, prefix: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path in (run_dir / TELEMETRY_DIR).glob(f"{prefix}*.jsonl"):
            if path.stat().st_size > 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"no {prefix} telemetry flushed within {timeout_s} s")
