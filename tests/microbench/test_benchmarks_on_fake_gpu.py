"""The benchmarks' host-side logic, end to end, on a fake CuPy (no GPU needed).

The fake runs each kernel as a Python model of its CUDA C source on a worker thread per
stream, checks every launch's argument types against the C signatures and every copy's
bounds. What is asserted here is protocol and bookkeeping (every metric present, the
ring's hashes and counts verified, copies verified, the persistent kernel stopped by its
stop word, failures isolated) — never the timings, which mean nothing on the fake.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.microbench.conftest import TINY
from tests.microbench.fake_cupy import FakeCudaError, FakeGpu, kernel_signatures
from zerohop.microbench import kernels as kernels_module
from zerohop.microbench import pcie, table
from zerohop.microbench.cuda_mem import StreamGate
from zerohop.microbench.kernels import SOURCE, STATE_STOPPED, Kernels
from zerohop.microbench.ring import metric_name
from zerohop.microbench.runner import run_benchmarks
from zerohop.microbench.schema import load_microbench

pytestmark = pytest.mark.unit

LAUNCH_METRICS = {
    "async_launch_us", "launch_sync_roundtrip_us", "graph_replay_per_node_us",
    "small_kernel_latency_high_prio_us", "small_kernel_latency_low_prio_us",
}
RING_METRICS = {
    "ring_roundtrip_us", "ring_descriptors_per_s", "launch_per_request_roundtrip_us",
    "memcpy_launch_roundtrip_us",
}


def test_all_three_benchmarks_complete_on_the_fake(fake_gpu: Callable[..., FakeGpu]) -> None:
    gpu = fake_gpu()
    result = run_benchmarks(["launch", "ring", "pcie"], TINY)
    assert result.status == "ok", result.reason
    assert result.environment.gpu_name == "Fake GPU"
    assert result.environment.sm_count == 4
    launch = result.benchmarks["launch"]
    assert set(launch.metrics) >= LAUNCH_METRICS
    assert launch.curve is None
    ring = result.benchmarks["ring"]
    assert set(ring.metrics) >= RING_METRICS
    for size in (16, 32):
        assert metric_name("ring_roundtrip", "us", size) in ring.metrics
        assert f"memcpy_launch_roundtrip_{size}B_us" in ring.metrics
    assert ring.metrics["ring_roundtrip_us"].n == TINY.ring_roundtrip_samples
    assert ring.metrics["ring_descriptors_per_s"].unit == "descriptors/s"
    # one persistent kernel per descriptor size, each ended by the stop word
    assert gpu.ring_exit_states == [STATE_STOPPED] * 3
    assert gpu.errors == []
    assert all(s.done for s in gpu.streams)

    curve = result.benchmarks["pcie"].curve or []
    sizes = TINY.pcie_sizes()
    assert len(curve) == len(pcie.SERIES) * len(sizes)
    assert all(p.verified for p in curve)
    assert {(p.direction, p.memory) for p in curve} == set(pcie.SERIES)
    for name in ("h2d_small_copy_latency_us", "d2h_small_copy_latency_us"):
        assert name in result.benchmarks["pcie"].metrics
    # every allocation was given back
    assert gpu.allocations == {}


def test_headline_pcie_metrics_and_goals(
    fake_gpu: Callable[..., FakeGpu], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 256 MiB headline, shrunk to 1 MiB so the fake can afford it."""
    fake_gpu()
    monkeypatch.setattr(pcie, "HEADLINE_PCIE_SIZE", 1 << 20)
    monkeypatch.setattr(table, "HEADLINE_PCIE_SIZE", 1 << 20)
    result = run_benchmarks(["pcie"], TINY)
    metrics = result.benchmarks["pcie"].metrics
    for direction, memory in pcie.SERIES:
        assert f"{direction}_{memory}_1MiB_gbps" in metrics
    # no NVML here: no link limit, so the goals are "not measured", not failed
    goals = table.evaluate_goals(result)
    assert [g.met for g in goals] == [None, None, None]
    assert "link limit unknown" in goals[0].detail


def test_corrupted_copies_are_caught(fake_gpu: Callable[..., FakeGpu]) -> None:
    fake_gpu(corrupt_copy_of_size=4096)
    result = run_benchmarks(["pcie"], TINY)
    bench = result.benchmarks["pcie"]
    assert bench.status == "partial"
    bad = {(p.direction, p.memory) for p in bench.curve or [] if not p.verified}
    assert bad == set(pcie.SERIES)
    assert all(p.verified for p in bench.curve or [] if p.size_bytes != 4096)
    assert "data differs" in (bench.reason or "")
    assert result.status == "partial"


def test_wrong_ring_hashes_are_caught(fake_gpu: Callable[..., FakeGpu]) -> None:
    fake_gpu(wrong_ring_hash=True)
    result = run_benchmarks(["ring"], TINY)
    ring = result.benchmarks["ring"]
    assert ring.status == "partial"
    assert "wrong payload hash" in (ring.reason or "")
    assert "hash total" in (ring.reason or "")
    assert "ring_roundtrip_us" in ring.metrics  # measured all the same


def test_one_failing_step_does_not_stop_the_others(
    fake_gpu: Callable[..., FakeGpu], monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = fake_gpu()
    cp = gpu.module()

    def no_capture(self: Any, mode: Any = None) -> None:
        raise RuntimeError("capture not supported here")

    monkeypatch.setattr(cp.cuda.Stream, "begin_capture", no_capture)
    import sys

    sys.modules["cupy"] = cp
    result = run_benchmarks(["launch"], TINY)
    launch = result.benchmarks["launch"]
    assert launch.status == "partial"
    assert "graph replay: RuntimeError: capture not supported here" in (launch.reason or "")
    assert "graph_replay_per_node_us" not in launch.metrics
    assert {"async_launch_us", "small_kernel_latency_high_prio_us"} <= set(launch.metrics)


def test_a_benchmark_that_cannot_start_is_failed_not_fatal(
    fake_gpu: Callable[..., FakeGpu], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpu()

    def boom(ctx: Any) -> Any:
        raise MemoryError("out of pinned memory")

    from zerohop.microbench import runner

    monkeypatch.setitem(runner.BENCHMARKS, "ring", runner.BenchmarkSpec(lambda p: 0, boom))
    result = run_benchmarks(["launch", "ring"], TINY)
    assert result.benchmarks["ring"].status == "failed"
    assert result.benchmarks["launch"].status == "ok"
    assert result.status == "partial"
    assert "ring: failed (MemoryError: out of pinned memory)" in (result.reason or "")


def test_progress_counts_every_step(fake_gpu: Callable[..., FakeGpu]) -> None:
    fake_gpu()
    seen: list[str] = []

    class Recorder:
        total = 0

        def advance(self, label: str) -> None:
            seen.append(label)

        def note(self, text: str) -> None:
            pass

    def factory(total: int) -> Recorder:
        Recorder.total = total
        return Recorder()

    run_benchmarks(["launch", "ring", "pcie"], TINY, progress_factory=factory)
    assert len(seen) == Recorder.total > 0


def test_fake_kernels_match_the_cuda_source() -> None:
    """The fake's signatures come from the source; the source's control-block layout
    must match the Python constants the host code uses."""
    signatures = kernel_signatures(SOURCE)
    assert set(signatures) == set(kernels_module.KERNEL_NAMES)
    assert signatures["zh_ring_consumer"] == [
        "u64", "u64", "unsigned int", "unsigned int", "u64", "long long"]
    for name in ("CTRL_STOP", "CTRL_ACK", "CTRL_CHECKSUM", "CTRL_TOTAL", "CTRL_PROCESSED",
                 "CTRL_STATE"):
        defined = re.search(rf"#define {name} (\d+)", SOURCE)
        assert defined and int(defined.group(1)) == getattr(kernels_module, name)


def test_fake_refuses_wrongly_typed_kernel_arguments(fake_gpu: Callable[..., FakeGpu]) -> None:
    gpu = fake_gpu()
    cp = gpu.module()
    kernel = cp.RawModule(code=SOURCE).get_function("zh_ack_from_device")
    with pytest.raises(FakeCudaError, match=r"argument 2 is int64, the kernel takes unsigned int"):
        kernel((1,), (1,), (np.uint64(1), np.uint64(2), np.int64(3)))
    with pytest.raises(FakeCudaError, match="2 arguments for 3"):
        kernel((1,), (1,), (np.uint64(1), np.uint64(2)))


def test_host_hash_matches_the_kernel_model() -> None:
    words = [1, 2, 3, 2**64 - 1]
    expected = 0xCBF29CE484222325
    for w in words:
        expected = ((expected ^ w) * 0x100000001B3) % 2**64
    assert kernels_module.fnv_hash(words) == expected


def test_gate_release_and_timeouts(fake_gpu: Callable[..., FakeGpu]) -> None:
    gpu = fake_gpu()
    cp = gpu.module()
    gate = StreamGate(cp, Kernels(cp), timeout_s=0.05)
    stream = cp.cuda.Stream(non_blocking=True)
    try:
        gate.hold(stream)
        gate.release()
        stream.synchronize()
        assert gate.released_in_time()
        gpu.blind_gate = True
        for attempt in range(StreamGate.MAX_TIMEOUTS_IN_A_ROW):
            gate.hold(stream)
            gate.release()
            stream.synchronize()
            if attempt < StreamGate.MAX_TIMEOUTS_IN_A_ROW - 1:
                assert not gate.released_in_time()
            else:
                with pytest.raises(RuntimeError, match="does not see the host's writes"):
                    gate.released_in_time()
    finally:
        gpu.blind_gate = False
        gate.close()
    assert gpu.allocations == {}


def test_a_blind_gate_fails_the_launch_steps_quickly(fake_gpu: Callable[..., FakeGpu]) -> None:
    import time

    fake_gpu(blind_gate=True)
    t0 = time.perf_counter()
    result = run_benchmarks(["launch"], TINY)
    launch = result.benchmarks["launch"]
    assert launch.status == "partial"
    reason = launch.reason or ""
    assert "async launch: RuntimeError" in reason and "gate" in reason
    assert "graph replay: RuntimeError: the gate kernel timed out 3 times in a row" in reason
    assert "launch_sync_roundtrip_us" in launch.metrics  # needs no gate
    assert time.perf_counter() - t0 < 20  # 2 gated steps x 3 timeouts x 2 s, not 55 x 2 s


def test_run_microbench_writes_the_file(
    fake_gpu: Callable[..., FakeGpu], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry `zerohop run` calls: run_microbench(path, quick=...) and cuda_available()."""
    from zerohop.microbench import runner

    fake_gpu()
    assert runner.cuda_available() == (True, None)
    monkeypatch.setattr(runner, "QUICK", TINY)
    result = runner.run_microbench(tmp_path / "microbench.json", only=["launch"])
    assert load_microbench(tmp_path / "microbench.json") == result
    assert list(result.benchmarks) == ["launch"]


@pytest.mark.usefixtures("no_cupy")
def test_run_microbench_without_a_gpu(tmp_path: Path) -> None:
    from zerohop.microbench import runner

    available, reason = runner.cuda_available()
    assert not available and reason and "CuPy" in reason
    result = runner.run_microbench(tmp_path / "mb.json")
    assert result.status == "skipped"
    assert load_microbench(tmp_path / "mb.json").reason == result.reason


def test_link_limit_from_nvml_under_load(
    fake_gpu: Callable[..., FakeGpu], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With NVML reporting Gen5 x16 the sweep carries % of the 63 GB/s limit, the
    environment records the link, and the goals are judged against it."""
    import sys

    from tests.microbench.test_gpu_env import fake_pynvml

    fake_gpu()
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    monkeypatch.setattr(pcie, "HEADLINE_PCIE_SIZE", 1 << 20)
    monkeypatch.setattr(table, "HEADLINE_PCIE_SIZE", 1 << 20)
    result = run_benchmarks(["pcie"], TINY)
    link = result.environment.pcie
    assert (link.gen, link.width) == (5, 16)
    assert link.theoretical_gbps_per_direction == pytest.approx(63.015, abs=1e-3)
    assert result.environment.clocks_after.sm_mhz == 1980
    for point in result.benchmarks["pcie"].curve or []:
        factor = 2 if point.direction == "bidir" else 1
        assert point.pct_of_link == pytest.approx(
            100 * point.gbps.median / (63.015384615 * factor), rel=1e-6)
    h2d = table.evaluate_goals(result)[0]
    [point] = [p for p in result.benchmarks["pcie"].curve or []
               if (p.direction, p.memory, p.size_bytes) == ("h2d", "pinned", 1 << 20)]
    assert point.pct_of_link is not None
    assert h2d.met is (point.pct_of_link >= 85.0)
    assert "of 63.0 GB/s" in h2d.detail
