"""Ring-buffer enqueue: the host hands request descriptors to an already-running kernel.

The ring lives in pinned, device-mapped (zero-copy) host memory. Each slot holds one
descriptor of 16, 32 or 64 bytes whose first 8-byte word is its sequence number,
written last; a persistent one-thread kernel polls the slot of the next expected number,
hashes the payload, publishes the hash and acknowledges the number in mapped memory.
The host spins on the acknowledgement. Both ends of each round trip are read from one
clock (the host's `perf_counter_ns`).

Compared, with the same acknowledgement path (host spinning on mapped memory):
- one kernel launch per request, the descriptor passed as kernel arguments;
- `cudaMemcpyAsync` of the descriptor into device memory, then a launch.

The persistent kernel always stops: the host sets the stop word in a `finally` block and
synchronises, and the kernel gives up on its own after `ring_kernel_timeout_s`.
Headline metrics use 64-byte descriptors; the other sizes carry the size in the name
(`ring_roundtrip_16B_us`, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import numpy as np

from zerohop.microbench.context import BenchContext, Deadline, no_gc
from zerohop.microbench.cuda_mem import MEMCPY_HOST_TO_DEVICE, DeviceBuffer, HostBuffer
from zerohop.microbench.kernels import (
    CTRL_ACK,
    CTRL_CHECKSUM,
    CTRL_PROCESSED,
    CTRL_STATE,
    CTRL_STOP,
    CTRL_TOTAL,
    CTRL_WORDS,
    MASK64,
    STATE_RUNNING,
    STATE_STOPPED,
    STATE_TIMED_OUT,
    cycles_guard,
    fnv_hash,
)
from zerohop.microbench.plan import Plan
from zerohop.microbench.progress import StepRecorder
from zerohop.microbench.schema import BenchmarkResult
from zerohop.microbench.stats import summarize

HEADLINE_DESCRIPTOR_BYTES = 64
PAYLOAD_VARIANTS = 64  # distinct descriptors cycled through (and verified)
WARMUP = 200
ACK_TIMEOUT_S = 1.0  # one acknowledgement; far above any sane round trip
START_TIMEOUT_S = 5.0

T = TypeVar("T")


def step_count(plan: Plan) -> int:
    return 3 * len(plan.ring_descriptor_bytes)


def metric_name(base: str, unit: str, size: int) -> str:
    """`ring_roundtrip_us` for the headline size, `ring_roundtrip_16B_us` otherwise."""
    suffix = "" if size == HEADLINE_DESCRIPTOR_BYTES else f"_{size}B"
    return f"{base}{suffix}_{unit}"


def run_ring(ctx: BenchContext) -> BenchmarkResult:
    rec = StepRecorder("ring", ctx.progress)
    if not ctx.can_map_host_memory:
        for size in ctx.plan.ring_descriptor_bytes:
            for label in ("ring", "launch per request", "memcpy + launch"):
                with rec.step(f"{label} {size} B"):
                    raise RuntimeError("the device cannot map host memory (canMapHostMemory=0)")
        return rec.result()
    for size in ctx.plan.ring_descriptor_bytes:
        payloads = Payloads(size, seed=size)
        with rec.step(f"ring {size} B"):
            _persistent_ring(ctx, rec, payloads)
        with rec.step(f"launch per request {size} B"):
            _launch_per_request(ctx, rec, payloads)
        with rec.step(f"memcpy + launch {size} B"):
            _memcpy_then_launch(ctx, rec, payloads)
    return rec.result()


class Payloads:
    """PAYLOAD_VARIANTS distinct descriptor payloads (words after the sequence number)
    and the FNV-1a hash the GPU must report for each."""

    def __init__(self, size_bytes: int, *, seed: int) -> None:
        if size_bytes % 8 or not 16 <= size_bytes <= 64:
            raise ValueError(f"descriptor size must be 16..64 bytes in 8-byte words: {size_bytes}")
        self.size_bytes = size_bytes
        self.words = size_bytes // 8  # including the sequence number
        rng = np.random.default_rng(seed)
        self.rows = rng.integers(
            0, np.iinfo(np.uint64).max, size=(PAYLOAD_VARIANTS, self.words - 1),
            dtype=np.uint64, endpoint=True,
        )
        self.hashes = np.array([fnv_hash([int(w) for w in row]) for row in self.rows],
                               dtype=np.uint64)

    def index(self, seq: int) -> int:
        return seq % PAYLOAD_VARIANTS


class RingSession:
    """One persistent consumer kernel and its ring; `close()` always stops it."""

    def __init__(self, ctx: BenchContext, payloads: Payloads) -> None:
        cp = ctx.cp
        self.slots = ctx.plan.ring_slots
        if self.slots & (self.slots - 1):
            raise ValueError(f"ring_slots must be a power of two, got {self.slots}")
        self.words = payloads.words
        self.payloads = payloads
        self._cp = cp
        self._started = False
        owned: list[HostBuffer] = []
        try:
            self.ring = HostBuffer(cp, self.slots * self.words * 8, mapped=True)
            owned.append(self.ring)
            self.ctrl = HostBuffer(cp, CTRL_WORDS * 8, mapped=True)
            owned.append(self.ctrl)
            self.stream = cp.cuda.Stream(non_blocking=True)
        except BaseException:
            for buffer in owned:
                buffer.close()
            raise
        self.ring.bytes[:] = 0
        self.ctrl.bytes[:] = 0
        self.flat = self.ring.words()
        self.table = self.flat.reshape(self.slots, self.words)
        self.ctl = self.ctrl.words()
        self.next_seq = 1
        self.expected_total = 0
        timeout_s = ctx.plan.ring_kernel_timeout_s
        self._args = (
            np.uint64(self.ring.device_ptr),
            np.uint64(self.ctrl.device_ptr),
            np.uint32(self.slots - 1),
            np.uint32(self.words),
            np.uint64(int(timeout_s * 1e9)),
            np.int64(cycles_guard(timeout_s)),
        )
        self._kernel = ctx.kernels.get("zh_ring_consumer")

    def start(self) -> None:
        with self.stream:
            self._kernel((1,), (32,), self._args)  # one warp: see zh_ring_consumer
        self._started = True
        deadline = time.perf_counter() + START_TIMEOUT_S
        while int(self.ctl[CTRL_STATE]) != STATE_RUNNING:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"the persistent kernel did not start in {START_TIMEOUT_S} s")

    def stop(self) -> int:
        """Set the stop word, wait for the kernel to end; its exit state."""
        self.ctl[CTRL_STOP] = 1
        if self._started:
            self.stream.synchronize()
            self._started = False
        return int(self.ctl[CTRL_STATE])

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.ctrl.close()
            self.ring.close()

    def roundtrips(self, count: int, deadline: Deadline) -> tuple[list[int], int]:
        """Enqueue one descriptor at a time, spin for its ack; (round trips ns, bad hashes)."""
        flat, ctl, words = self.flat, self.ctl, self.words
        rows, hashes = self.payloads.rows, self.payloads.hashes
        mask = self.slots - 1
        timeout_ns = int(ACK_TIMEOUT_S * 1e9)
        perf = time.perf_counter_ns
        samples: list[int] = []
        bad = 0
        with no_gc():
            for i in range(WARMUP + count):
                seq = self.next_seq
                j = seq % rows.shape[0]
                payload = rows[j]
                base = ((seq - 1) & mask) * words
                t0 = perf()
                flat[base + 1 : base + words] = payload
                flat[base] = seq
                while ctl[CTRL_ACK] != seq:
                    if perf() - t0 > timeout_ns:
                        raise TimeoutError(f"no acknowledgement of descriptor {seq} in 1 s")
                t1 = perf()
                self.next_seq = seq + 1
                self.expected_total = (self.expected_total + int(hashes[j])) & MASK64
                if ctl[CTRL_CHECKSUM] != hashes[j]:
                    bad += 1
                if i >= WARMUP:
                    samples.append(t1 - t0)
                    if (i & 255) == 255 and deadline.passed():
                        break
        return samples, bad

    def sustained_rate(self, windows: int, window_s: float, batch: int) -> list[float]:
        """Keep the ring full with batches of descriptors; acknowledged descriptors per
        second in each window of `window_s` (the kernel's sustained rate)."""
        if batch > self.slots:
            raise ValueError(f"batch {batch} larger than the ring ({self.slots})")
        ctl = self.ctl
        rows, hashes = self.payloads.rows, self.payloads.hashes
        timeout_ns = int(ACK_TIMEOUT_S * 1e9)
        perf = time.perf_counter_ns
        window_ns = int(window_s * 1e9)
        rates: list[float] = []
        t_prev, ack_prev = perf(), int(ctl[CTRL_ACK])
        offsets = np.arange(batch, dtype=np.int64)
        while len(rates) < windows:
            first = self.next_seq
            last = first + batch - 1
            wait_from = perf()
            while last - int(ctl[CTRL_ACK]) > self.slots:  # a slot is reused only once acked
                if perf() - wait_from > timeout_ns:
                    raise TimeoutError("the persistent kernel stopped consuming the ring")
            seqs = first + offsets
            idx = seqs % rows.shape[0]
            self._write_batch(first, seqs, rows[idx])
            self.next_seq = last + 1
            batch_hash = int(hashes[idx].sum(dtype=np.uint64))
            self.expected_total = (self.expected_total + batch_hash) & MASK64
            now = perf()
            if now - t_prev >= window_ns:
                ack = int(ctl[CTRL_ACK])
                rates.append((ack - ack_prev) / ((now - t_prev) / 1e9))
                t_prev, ack_prev = now, ack
        self.drain()
        return rates

    def drain(self) -> None:
        last = self.next_seq - 1
        deadline = time.perf_counter() + ACK_TIMEOUT_S
        while int(self.ctl[CTRL_ACK]) != last:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"ring not drained: ack {int(self.ctl[CTRL_ACK])} of {last}")

    def verify_totals(self) -> str | None:
        """After draining: did the kernel see every descriptor exactly as written?"""
        processed = int(self.ctl[CTRL_PROCESSED])
        total = int(self.ctl[CTRL_TOTAL])
        if processed != self.next_seq - 1:
            return f"kernel processed {processed} descriptors, host wrote {self.next_seq - 1}"
        if total != self.expected_total:
            return "hash total of the descriptors the kernel read differs from what was written"
        return None

    def _write_batch(self, first: int, seqs: np.ndarray[Any, Any], rows: np.ndarray) -> None:
        """Payloads of the whole batch first, then the sequence numbers: a slot's number
        never becomes visible before its payload (x86 stores are seen in order)."""
        start = (first - 1) & (self.slots - 1)
        head = min(len(seqs), self.slots - start)
        table = self.table
        table[start : start + head, 1:] = rows[:head]
        if head < len(seqs):
            table[: len(seqs) - head, 1:] = rows[head:]
        table[start : start + head, 0] = seqs[:head]
        if head < len(seqs):
            table[: len(seqs) - head, 0] = seqs[head:]


def _persistent_ring(ctx: BenchContext, rec: StepRecorder, payloads: Payloads) -> None:
    plan = ctx.plan
    size = payloads.size_bytes
    session = RingSession(ctx, payloads)
    try:
        session.start()
        samples, bad = session.roundtrips(plan.ring_roundtrip_samples, Deadline(plan.step_budget_s))
        rates = session.sustained_rate(
            plan.ring_throughput_windows, plan.ring_window_s, plan.ring_batch
        )
        problem = session.verify_totals()
    finally:
        try:
            exit_state = session.stop()
        finally:
            session.close()
    if exit_state == STATE_TIMED_OUT:
        rec.warn(f"{size} B: the persistent kernel hit its timeout instead of the stop word")
    elif exit_state != STATE_STOPPED:
        rec.warn(f"{size} B: the persistent kernel left state {exit_state}")
    if bad:
        rec.warn(f"{size} B: {bad} acknowledgements carried a wrong payload hash")
    if problem:
        rec.warn(f"{size} B: {problem}")
    rec.add(
        metric_name("ring_roundtrip", "us", size),
        summarize(
            [s / 1e3 for s in samples],
            unit="us",
            description=(
                f"{size}-byte descriptor written into a zero-copy ring -> persistent kernel "
                "acknowledges in mapped memory; host clock from before the write to seeing "
                "the ack (one descriptor in flight)"
            ),
        ),
    )
    rec.add(
        metric_name("ring_descriptors", "per_s", size),
        summarize(
            rates,
            unit="descriptors/s",
            description=(
                f"{size}-byte descriptors acknowledged per second with the ring kept full "
                f"({plan.ring_slots} slots, batches of {plan.ring_batch}); one sample per "
                f"{plan.ring_window_s:g} s window; one consumer thread"
            ),
        ),
    )


def _launch_per_request(ctx: BenchContext, rec: StepRecorder, payloads: Payloads) -> None:
    cp = ctx.cp
    kernel = ctx.kernels.get("zh_ack_from_args")
    with HostBuffer(cp, CTRL_WORDS * 8, mapped=True) as ctrl:
        ctrl.bytes[:] = 0
        head = (np.uint64(ctrl.device_ptr), np.uint32(payloads.words))
        padded = [
            tuple(np.uint64(w) for w in row) + (np.uint64(0),) * (8 - payloads.words)
            for row in payloads.rows
        ]
        samples, bad = _acked_roundtrips(
            ctx, cp.cuda.Stream(non_blocking=True), ctrl.words(), payloads, "launch",
            prepare=lambda i, seq, j: (*head, np.uint64(seq), *padded[j]),
            send=partial(kernel, (1,), (1,)),
        )
    _record(
        rec, payloads, samples, bad, "launch_per_request_roundtrip", "launch per request",
        f"one kernel launch per {payloads.size_bytes}-byte request (descriptor as "
        "kernel arguments); host clock from the launch call to seeing the ack the "
        "kernel writes in mapped memory",
    )


def _memcpy_then_launch(ctx: BenchContext, rec: StepRecorder, payloads: Payloads) -> None:
    cp, plan = ctx.cp, ctx.plan
    rt = cp.cuda.runtime
    kernel = ctx.kernels.get("zh_ack_from_device")
    words = payloads.words
    nbytes = words * 8
    slots = plan.ring_slots
    with (
        HostBuffer(cp, CTRL_WORDS * 8, mapped=True) as ctrl,
        HostBuffer(cp, slots * nbytes) as staging,
        DeviceBuffer(cp, slots * nbytes) as device,
    ):
        ctrl.bytes[:] = 0
        stage = staging.words()
        tail = (np.uint64(ctrl.device_ptr), np.uint32(words))
        slot_args = [(np.uint64(device.ptr + s * nbytes), *tail) for s in range(slots)]

        def prepare(i: int, seq: int, j: int) -> tuple[int, int, int, int, int]:
            slot = i % slots
            return slot, seq, j, slot * words, slot * nbytes

        def send(prepared: tuple[int, int, int, int, int]) -> None:
            slot, seq, j, base, offset = prepared
            stage[base + 1 : base + words] = payloads.rows[j]
            stage[base] = seq
            rt.memcpyAsync(
                device.ptr + offset, staging.host_ptr + offset, nbytes,
                MEMCPY_HOST_TO_DEVICE, stream_ptr,
            )
            kernel((1,), (1,), slot_args[slot])

        stream = cp.cuda.Stream(non_blocking=True)
        stream_ptr = stream.ptr
        samples, bad = _acked_roundtrips(ctx, stream, ctrl.words(), payloads, "request",
                                         prepare=prepare, send=send)
    _record(
        rec, payloads, samples, bad, "memcpy_launch_roundtrip", "memcpy + launch",
        f"{payloads.size_bytes}-byte descriptor written to pinned memory, "
        "cudaMemcpyAsync to the device, kernel launch; host clock to seeing the ack "
        "in mapped memory",
    )


def _acked_roundtrips(
    ctx: BenchContext, stream: Any, ctl: Any, payloads: Payloads, what: str, *,
    prepare: Callable[[int, int, int], T], send: Callable[[T], object],
) -> tuple[list[int], int]:
    """Round trips of one request at a time, each from `send` handing request `seq`
    (payload `j`, made ready by `prepare`, untimed) to the device, to seeing the kernel's
    acknowledgement of `seq` in mapped memory: the samples in ns after the warm-up, and
    how many acknowledgements came with a wrong payload hash."""
    plan = ctx.plan
    samples: list[int] = []
    bad = 0
    deadline = Deadline(plan.step_budget_s)
    perf = time.perf_counter_ns
    timeout_ns = int(ACK_TIMEOUT_S * 1e9)
    try:
        with stream, no_gc():
            for i in range(WARMUP + plan.ring_compare_samples):
                seq = i + 1
                j = payloads.index(seq)
                prepared = prepare(i, seq, j)
                t0 = perf()
                send(prepared)
                while ctl[CTRL_ACK] != seq:
                    if perf() - t0 > timeout_ns:
                        raise TimeoutError(f"no acknowledgement of {what} {seq} in 1 s")
                t1 = perf()
                if ctl[CTRL_CHECKSUM] != payloads.hashes[j]:
                    bad += 1
                if i >= WARMUP:
                    samples.append(t1 - t0)
                    if (i & 255) == 255 and deadline.passed():
                        break
    finally:
        stream.synchronize()
    return samples, bad


def _record(rec: StepRecorder, payloads: Payloads, samples: list[int], bad: int,
            base: str, label: str, description: str) -> None:
    """One compared way's round trips (in µs) as its metric, and a warning for any wrong
    payload hash."""
    if bad:
        rec.warn(f"{payloads.size_bytes} B {label}: {bad} wrong payload hashes")
    rec.add(
        metric_name(base, "us", payloads.size_bytes),
        summarize([s / 1e3 for s in samples], unit="us", description=description),
    )
