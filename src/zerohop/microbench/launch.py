"""Kernel-launch latency: what it costs to get an (empty) kernel onto the GPU.

Four measurements, each its own step (one failing does not stop the others):
- `async_launch_us`: GPU time per empty kernel when launches run back to back. The
  launches are enqueued behind a gate kernel and timed with events once released, so
  the figure is the GPU's own per-launch cost, not the host's enqueue rate (which is
  reported separately as `async_launch_host_us`).
- `launch_sync_roundtrip_us`: host clock around one launch + `cudaStreamSynchronize`.
- `graph_replay_per_node_us`: a captured CUDA graph of N empty-kernel nodes, replayed
  behind the gate and timed with events, divided by N.
- `small_kernel_latency_{high,low}_prio_us`: a one-warp kernel's latency (events on its
  own stream) while a long kernel on a lowest-priority stream fills every SM, the small
  one's stream being of the highest or of the lowest priority.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np

from zerohop.microbench.context import BenchContext, Deadline, elapsed_us, gated, no_gc
from zerohop.microbench.cuda_mem import StreamGate
from zerohop.microbench.kernels import cycles_guard
from zerohop.microbench.plan import Plan
from zerohop.microbench.progress import StepRecorder
from zerohop.microbench.schema import BenchmarkResult

STEPS = ("async launch", "launch + sync round trip", "graph replay", "stream priority")
SPIN_THREADS_PER_BLOCK = 256


def step_count(plan: Plan) -> int:
    return len(STEPS)


def run_launch(ctx: BenchContext) -> BenchmarkResult:
    rec = StepRecorder("launch", ctx.progress)
    empty = ctx.kernels.get("zh_empty")
    arg = (np.int32(0),)
    stream = ctx.cp.cuda.Stream(non_blocking=True)
    with stream:  # warm-up: module load, context, first-launch costs stay out
        for _ in range(ctx.plan.launch_warmup):
            empty((1,), (1,), arg)
    stream.synchronize()
    gate = StreamGate(ctx.cp, ctx.kernels)
    try:
        with rec.step(STEPS[0]):
            _async_launch(ctx, rec, gate, stream, empty, arg)
        with rec.step(STEPS[1]):
            _launch_sync_roundtrip(ctx, rec, stream, empty, arg)
        with rec.step(STEPS[2]):
            _graph_replay(ctx, rec, gate, stream, empty, arg)
        with rec.step(STEPS[3]):
            _stream_priority(ctx, rec, empty, arg)
    finally:
        gate.close()
    return rec.result()


def _async_launch(
    ctx: BenchContext, rec: StepRecorder, gate: StreamGate, stream: Any, empty: Any, arg: tuple
) -> None:
    plan = ctx.plan
    n = plan.async_batch_launches

    def batch() -> None:
        with stream:
            for _ in range(n):
                empty((1,), (1,), arg)

    batch_gpu_us, batch_host_us, timed_out = _gated_runs(
        ctx, gate, stream, plan.async_batches, batch, (), run_name="batch", hold_gc=True
    )
    gpu_us = [us / n for us in batch_gpu_us]
    host_us = [us / n for us in batch_host_us]
    rec.add_samples("async_launch_us", gpu_us, unit="us", description=(
        f"GPU time per empty kernel, {n} back-to-back launches released together "
        "from a gate and timed with CUDA events (host enqueue cost excluded); "
        f"one sample per batch{_discarded(timed_out)}"
    ))
    rec.add_samples("async_launch_host_us", host_us, unit="us", description=(
        "host CPU time per kernel launch call through CuPy (Python + driver "
        "enqueue), same batches as async_launch_us"
    ))


def _gated_runs(
    ctx: BenchContext,
    gate: StreamGate,
    stream: Any,
    runs: int,
    launch: Callable[..., object],
    args: tuple,
    *,
    run_name: str,
    hold_gc: bool,
) -> tuple[list[float], list[float], int]:
    """Up to `runs` runs of `launch(*args)`, each enqueued behind the gate and released at
    once: GPU microseconds by CUDA events, host microseconds of the call, and how many
    runs were dropped because their gate timed out (an error if that was every run).
    `args` keeps a bound method's call as it is inside the host clock."""
    cp = ctx.cp
    start, end = cp.cuda.Event(), cp.cuda.Event()
    gpu_us: list[float] = []
    host_us: list[float] = []
    timed_out = 0
    deadline = Deadline(ctx.plan.step_budget_s)
    for _ in range(runs):
        if deadline.passed():
            break
        with no_gc() if hold_gc else nullcontext(), gated(gate, stream):
            start.record(stream)
            t0 = time.perf_counter_ns()
            launch(*args)
            t1 = time.perf_counter_ns()
            end.record(stream)
        end.synchronize()
        if not gate.released_in_time():
            timed_out += 1
            continue
        gpu_us.append(elapsed_us(cp, start, end))
        host_us.append((t1 - t0) / 1e3)
    if not gpu_us:
        raise RuntimeError(f"every {run_name}'s gate timed out ({timed_out})")
    return gpu_us, host_us, timed_out


def _launch_sync_roundtrip(
    ctx: BenchContext, rec: StepRecorder, stream: Any, empty: Any, arg: tuple
) -> None:
    plan = ctx.plan
    samples_ns: list[int] = []
    deadline = Deadline(plan.step_budget_s)
    perf = time.perf_counter_ns
    with stream, no_gc():
        for _ in range(plan.launch_warmup):
            empty((1,), (1,), arg)
            stream.synchronize()
        for i in range(plan.launch_roundtrip_samples):
            t0 = perf()
            empty((1,), (1,), arg)
            stream.synchronize()
            samples_ns.append(perf() - t0)
            if (i & 255) == 255 and deadline.passed():
                break
    rec.add_samples("launch_sync_roundtrip_us", [s / 1e3 for s in samples_ns], unit="us",
                    description=(
                        "host clock around one empty-kernel launch + cudaStreamSynchronize "
                        "(non-blocking stream, default spin/yield scheduling)"
                    ))


def _graph_replay(
    ctx: BenchContext, rec: StepRecorder, gate: StreamGate, stream: Any, empty: Any, arg: tuple
) -> None:
    cp, plan = ctx.cp, ctx.plan
    nodes = plan.graph_nodes
    capture = cp.cuda.Stream(non_blocking=True)
    with capture:
        capture.begin_capture()
        try:
            for _ in range(nodes):
                empty((1,), (1,), arg)
        finally:
            graph = capture.end_capture()
    upload = getattr(graph, "upload", None)
    if upload is not None:
        upload(stream)
    for _ in range(3):
        graph.launch(stream)
    stream.synchronize()

    replay_us, host_us, timed_out = _gated_runs(
        ctx, gate, stream, plan.graph_replays, graph.launch, (stream,),
        run_name="replay", hold_gc=False,
    )
    per_node_us = [us / nodes for us in replay_us]
    rec.add_samples("graph_replay_per_node_us", per_node_us, unit="us", description=(
        f"GPU time of one replay of a captured graph of {nodes} empty-kernel nodes, "
        f"divided by {nodes}; replays released from a gate, timed with CUDA events"
        f"{_discarded(timed_out)}"
    ))
    rec.add_samples("graph_launch_host_us", host_us, unit="us",
                    description=f"host CPU time of one cudaGraphLaunch call ({nodes} nodes)")


def _stream_priority(ctx: BenchContext, rec: StepRecorder, empty: Any, arg: tuple) -> None:
    cp, plan = ctx.cp, ctx.plan
    least, greatest = stream_priority_range(cp)
    if least == greatest:
        raise RuntimeError(f"the device offers one stream priority only ({least})")
    long_stream = cp.cuda.Stream(non_blocking=True, priority=least)
    streams = {
        "high": cp.cuda.Stream(non_blocking=True, priority=greatest),
        "low": cp.cuda.Stream(non_blocking=True, priority=least),
    }
    spin = ctx.kernels.get("zh_spin_blocks")
    spin_s = plan.priority_block_spin_us * 1e-6
    blocks_per_sm = max(1, ctx.max_threads_per_sm // SPIN_THREADS_PER_BLOCK)
    waves = max(1, math.ceil(plan.priority_long_kernel_ms * 1e3 / plan.priority_block_spin_us))
    grid = ctx.sm_count * blocks_per_sm * waves
    spin_args = (np.uint64(int(spin_s * 1e9)), np.int64(cycles_guard(spin_s)))

    long_start, long_end = cp.cuda.Event(), cp.cuda.Event()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    latencies: dict[str, list[float]] = {"high": [], "low": []}
    long_ms: list[float] = []
    not_overlapped = 0
    deadline = Deadline(plan.step_budget_s)
    for i in range(plan.priority_samples):
        if i and deadline.passed():
            break
        order = ("high", "low") if i % 2 == 0 else ("low", "high")
        for which in order:
            small = streams[which]
            long_start.record(long_stream)
            with long_stream:
                spin((grid,), (SPIN_THREADS_PER_BLOCK,), spin_args)
            long_end.record(long_stream)
            _wait_until_reached(long_start, timeout_s=2.0)
            time.sleep(0.0005)  # the long kernel now holds every SM
            e0.record(small)
            with small:
                empty((1,), (32,), arg)
            e1.record(small)
            e1.synchronize()
            overlapped = not long_end.done
            long_stream.synchronize()
            long_ms.append(float(cp.cuda.get_elapsed_time(long_start, long_end)))
            if which == "high" and not overlapped:
                not_overlapped += 1  # the long kernel had ended: no contention to show
                continue
            latencies[which].append(elapsed_us(cp, e0, e1))
    if not latencies["high"] or not latencies["low"]:
        raise RuntimeError(
            "no valid samples: the long kernel ended before the small one "
            f"({not_overlapped} times)"
        )
    context = (
        f"while a {float(np.median(long_ms)):.1f} ms kernel ({grid} blocks x "
        f"{SPIN_THREADS_PER_BLOCK} threads, each block spinning "
        f"{plan.priority_block_spin_us:g} us) on a priority-{least} stream fills the GPU; "
        f"stream priorities range {least} (least) .. {greatest} (greatest)"
    )
    rec.add_samples("small_kernel_latency_high_prio_us", latencies["high"], unit="us",
                    description=(
                        f"events around a 1-warp kernel on a priority-{greatest} stream "
                        f"{context}"
                        f"{_discarded(not_overlapped, 'the long kernel had already ended')}"
                    ))
    rec.add_samples("small_kernel_latency_low_prio_us", latencies["low"], unit="us",
                    description=(
                        f"events around a 1-warp kernel on a priority-{least} stream {context}"
                    ))


def stream_priority_range(cp: Any) -> tuple[int, int]:
    """(least, greatest) stream priority; lower numbers are higher priorities."""
    rt = cp.cuda.runtime
    query = getattr(rt, "deviceGetStreamPriorityRange", None)
    if query is not None:
        least, greatest = query()
        return int(least), int(greatest)
    # CUDA clamps an out-of-range priority to the nearest end of the range: read it back.
    return _priority_of(cp, 1 << 20), _priority_of(cp, -(1 << 20))


def _priority_of(cp: Any, requested: int) -> int:
    stream = cp.cuda.Stream(non_blocking=True, priority=requested)
    value = getattr(stream, "priority", None)
    if value is None:
        value = cp.cuda.runtime.streamGetPriority(stream.ptr)
    return int(value)


def _wait_until_reached(event: Any, *, timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while not event.done:
        if time.perf_counter() > deadline:
            raise TimeoutError("the long kernel did not start within 2 s")


def _discarded(count: int, why: str = "its gate timed out") -> str:
    return f"; {count} sample(s) discarded: {why}" if count else ""
