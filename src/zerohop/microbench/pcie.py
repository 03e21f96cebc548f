"""PCIe throughput and small-copy latency between host and device.

Method (after nvbandwidth):
- Pinned copies are `cudaMemcpyAsync` calls enqueued behind a gate kernel and timed
  with CUDA events once released: GPU-side time, no host enqueue cost. Bidirectional
  runs an H2D and a D2H stream released by the same event; bytes of both count.
- Pageable copies cannot go behind a gate (the driver stages them through the host and
  may wait for the stream), so they are timed on the host clock around synchronous
  `cudaMemcpy` calls plus a final synchronisation: what an application pays.
- Small copies are repeated up to a target byte count per sample; every copy of a sample
  goes to a different offset of a buffer far larger than the GPU's L2 and the CPU's
  caches, so no repetition is served from a cache.
- Each size is verified once: destination poisoned, one copy, compared byte for byte
  with the source pattern (a per-word hash of the word's index, so shifted data fails).
- The link limit comes from NVML's generation and width read while a large copy runs
  (idle links train down to save power); see `pcie_limit`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from zerohop.microbench.context import BenchContext, Deadline, elapsed_us, gated
from zerohop.microbench.cuda_mem import (
    MEMCPY_DEVICE_TO_HOST,
    MEMCPY_HOST_TO_DEVICE,
    DeviceBuffer,
    HostBuffer,
    StreamGate,
)
from zerohop.microbench.gpu_env import nvml_reader, pci_bus_id
from zerohop.microbench.pcie_limit import link_limit, pct_of_link
from zerohop.microbench.plan import HEADLINE_PCIE_SIZE, SMALL_COPY_BYTES, MiB, Plan
from zerohop.microbench.progress import StepRecorder
from zerohop.microbench.schema import BenchmarkResult, CurvePoint, PcieLink, Stat
from zerohop.microbench.stats import gbps, summarize

SERIES: tuple[tuple[str, str], ...] = (
    ("h2d", "pinned"),
    ("d2h", "pinned"),
    ("bidir", "pinned"),
    ("h2d", "pageable"),
    ("d2h", "pageable"),
)
PATTERN_MULTIPLIER = 0x9E3779B97F4A7C15  # golden-ratio hash of the word index
PATTERN_XOR = 0xA5A5_5A5A_0F0F_F0F0
POISON = 0xE7
LARGE_SAMPLE_BYTES = 16 * MiB  # sizes from here on use pcie_samples_large
PROBE_BYTES = 256 * MiB
PROBE_COPIES = 8
PROBE_TOTAL_BYTES = 6 * (1 << 30)  # about 0.1 s of Gen5 x16 traffic


def step_count(plan: Plan) -> int:
    return 2 + len(SERIES) * len(plan.pcie_sizes()) + 2


def headline_metric(direction: str, memory: str) -> str:
    return f"{direction}_{memory}_{HEADLINE_PCIE_SIZE // MiB}MiB_gbps"


def copies_per_sample(size: int, plan: Plan) -> int:
    """Enough copies that one sample moves about `pcie_target_bytes_per_sample`, capped
    well under the launch queue's depth (the copies wait behind a gate)."""
    wanted = math.ceil(plan.pcie_target_bytes_per_sample / size)
    return max(1, min(plan.pcie_max_copies_per_sample, wanted))


def samples_for(size: int, plan: Plan) -> int:
    return plan.pcie_samples_large if size >= LARGE_SAMPLE_BYTES else plan.pcie_samples_small


def fill_pattern(words: np.ndarray[Any, np.dtype[np.uint64]], *, chunk: int = 8 << 20) -> None:
    """words[i] = (i * golden) ^ const, in chunks so no buffer-sized temporary is made."""
    for start in range(0, words.size, chunk):
        stop = min(start + chunk, words.size)
        idx = np.arange(start, stop, dtype=np.uint64)
        np.multiply(idx, np.uint64(PATTERN_MULTIPLIER), out=words[start:stop])
        np.bitwise_xor(words[start:stop], np.uint64(PATTERN_XOR), out=words[start:stop])


def run_pcie(ctx: BenchContext) -> BenchmarkResult:
    rec = StepRecorder("pcie", ctx.progress)
    bench: PcieBench | None = None
    try:
        with rec.step("allocate and fill buffers"):
            bench = PcieBench(ctx)
        if bench is None:
            for _ in range(step_count(ctx.plan) - 1):
                ctx.progress.advance("pcie: skipped (no buffers)")
            return rec.result(with_curve=True)
        with rec.step("link under load"):
            ctx.link_under_load = bench.probe_link()
        limit, link_text = bench.limit(ctx.link_under_load)
        for direction, memory in SERIES:
            for size in ctx.plan.pcie_sizes():
                with rec.step(f"{direction} {memory} {size_text(size)}"):
                    point = bench.measure(direction, memory, size, limit, link_text)
                    rec.curve.append(point)
                    if not point.verified:
                        rec.warn(f"{direction} {memory} {size_text(size)}: data differs")
                    if size == HEADLINE_PCIE_SIZE:
                        rec.add(headline_metric(direction, memory), point.gbps)
        for direction in ("h2d", "d2h"):
            with rec.step(f"{direction} small-copy latency"):
                gpu, host = bench.small_copy_latency(direction)
                rec.add(f"{direction}_small_copy_latency_us", gpu)
                rec.add(f"{direction}_small_copy_roundtrip_us", host)
    finally:
        if bench is not None:
            bench.close()
    return rec.result(with_curve=True)


class PcieBench:
    """Owns the buffers: pinned source/destination, pageable source/destination, two
    device buffers, all of `pcie_max_bytes`. The device-side source holds the pattern."""

    def __init__(self, ctx: BenchContext) -> None:
        self.ctx = ctx
        self.cp = ctx.cp
        self.rt = ctx.cp.cuda.runtime
        self.plan = ctx.plan
        cap = self.cap = ctx.plan.pcie_max_bytes
        self._owned: list[Any] = []
        try:
            self.pinned_src = self._own(HostBuffer(self.cp, cap))
            self.pinned_dst = self._own(HostBuffer(self.cp, cap))
            self.dev_dst = self._own(DeviceBuffer(self.cp, cap))
            self.dev_src = self._own(DeviceBuffer(self.cp, cap))
            self.gate = self._own(StreamGate(self.cp, ctx.kernels))
            fill_pattern(self.pinned_src.words())
            self.expected = self.pinned_src.bytes  # the pattern, byte view
            self.pageable_src = self.expected.copy()
            self.pageable_dst = np.full(cap, POISON, dtype=np.uint8)
            self.check = np.empty(cap, dtype=np.uint8)  # read-back area for H2D checks
            self.pinned_dst.bytes.fill(POISON)
            self.rt.memcpy(self.dev_src.ptr, self.pinned_src.host_ptr, cap, MEMCPY_HOST_TO_DEVICE)
            self.streams = [self.cp.cuda.Stream(non_blocking=True) for _ in range(3)]
        except BaseException:
            self.close()
            raise

    def _own(self, resource: Any) -> Any:
        self._owned.append(resource)
        return resource

    def close(self) -> None:
        while self._owned:
            self._owned.pop().close()

    # --- the link -----------------------------------------------------------------------
    def probe_link(self) -> PcieLink:
        """Read NVML's link generation/width while large H2D copies keep it busy (NVML
        is opened first: its start-up can outlast a short burst of copies)."""
        stream = self.streams[0]
        size = min(self.cap, PROBE_BYTES)
        copies = min(64, max(PROBE_COPIES, math.ceil(PROBE_TOTAL_BYTES / size)))
        with nvml_reader(pci_bus_id(self.cp, self.ctx.device), self.ctx.device) as nvml:
            for _ in range(copies):
                self.rt.memcpyAsync(
                    self.dev_dst.ptr, self.pinned_src.host_ptr, size, MEMCPY_HOST_TO_DEVICE,
                    stream.ptr,
                )
            try:
                time.sleep(0.005)
                link = nvml.link()
            finally:
                stream.synchronize()
        gen, width = (link.gen, link.width) if link.gen and link.width else (
            link.max_gen, link.max_width)
        limit, _ = link_limit(gen, width)
        return link.model_copy(update={"theoretical_gbps_per_direction": limit})

    def limit(self, link: PcieLink | None) -> tuple[float | None, str]:
        if link is None:
            return None, "link unknown (probe failed)"
        gen: int | None
        width: int | None
        if link.gen and link.width:
            gen, width, source = link.gen, link.width, "NVML, read under load"
        else:
            gen, width, source = link.max_gen, link.max_width, "NVML maximum"
        limit, note = link_limit(gen, width)
        if limit is None:
            return None, note or "link unknown"
        return limit, f"Gen{gen} x{width} = {limit:.1f} GB/s per direction ({source})"

    # --- one curve point ----------------------------------------------------------------
    def measure(
        self, direction: str, memory: str, size: int, limit: float | None, link_text: str
    ) -> CurvePoint:
        verified = self._verify(direction, memory, size)
        if memory == "pinned":
            samples = self._pinned_samples(direction, size)
        else:
            samples = self._pageable_samples(direction, size)
        reps = copies_per_sample(size, self.plan)
        how = (
            "CUDA events around cudaMemcpyAsync calls released from a gate"
            if memory == "pinned"
            else "host clock around synchronous cudaMemcpy calls + synchronise"
        )
        both = (
            " (bytes of both directions; % of link against twice the per-direction limit)"
            if direction == "bidir"
            else ""
        )
        stat = summarize(
            samples,
            unit="GB/s",
            description=(
                f"{direction.upper()} {memory} copies of {size_text(size)}{both}, "
                f"{reps} per sample at rotating offsets; {how}; link: {link_text}"
            ),
        )
        # Bidirectional traffic uses both directions of the link: compare with twice the limit.
        per_point_limit = None if limit is None else limit * (2 if direction == "bidir" else 1)
        pct = pct_of_link(stat.median, per_point_limit)
        if pct is not None and pct > 100.0:
            stat = stat.model_copy(update={"description": stat.description + (
                f"; measured {pct:.0f}% of the reported link: NVML's generation/width is "
                "probably virtual (VM) rather than the physical link")})
        return CurvePoint(
            direction=direction,  # type: ignore[arg-type]
            memory=memory,  # type: ignore[arg-type]
            size_bytes=size,
            gbps=stat,
            pct_of_link=pct,
            verified=verified,
        )

    def _copy_fn(self, direction: str, memory: str) -> Callable[[int, int], None]:
        """(offset, size) -> one synchronous copy, for verification and pageable timing."""
        rt = self.rt
        if memory == "pinned":
            host_src, host_dst = self.pinned_src.host_ptr, self.pinned_dst.host_ptr
        else:
            host_src, host_dst = self.pageable_src.ctypes.data, self.pageable_dst.ctypes.data
        dev_dst, dev_src = self.dev_dst.ptr, self.dev_src.ptr
        if direction == "h2d":
            return lambda off, n: rt.memcpy(dev_dst + off, host_src + off, n, MEMCPY_HOST_TO_DEVICE)
        return lambda off, n: rt.memcpy(host_dst + off, dev_src + off, n, MEMCPY_DEVICE_TO_HOST)

    def _verify(self, direction: str, memory: str, size: int) -> bool:
        directions = ("h2d", "d2h") if direction == "bidir" else (direction,)
        return all(self._verify_one(d, memory, size) for d in directions)

    def _verify_one(self, direction: str, memory: str, size: int) -> bool:
        copy = self._copy_fn(direction, memory)
        if direction == "h2d":
            self.rt.memset(self.dev_dst.ptr, POISON, size)
            copy(0, size)
            self.check[:size] = POISON
            self.rt.memcpy(self.check.ctypes.data, self.dev_dst.ptr, size, MEMCPY_DEVICE_TO_HOST)
            got = self.check[:size]
        else:
            dst = self.pinned_dst.bytes if memory == "pinned" else self.pageable_dst
            dst[:size] = POISON
            copy(0, size)
            got = dst[:size]
        return bool(np.array_equal(got, self.expected[:size]))

    def _pinned_samples(self, direction: str, size: int) -> list[float]:
        cp, rt = self.cp, self.rt
        reps = copies_per_sample(size, self.plan)
        slots = self.cap // size
        s0, s1, s2 = self.streams
        start = cp.cuda.Event()
        ends = [cp.cuda.Event(), cp.cuda.Event()]
        plan_dirs = ("h2d", "d2h") if direction == "bidir" else (direction,)
        streams = {"h2d": s1, "d2h": s2}
        src = {"h2d": self.pinned_src.host_ptr, "d2h": self.dev_src.ptr}
        dst = {"h2d": self.dev_dst.ptr, "d2h": self.pinned_dst.host_ptr}
        kind = {"h2d": MEMCPY_HOST_TO_DEVICE, "d2h": MEMCPY_DEVICE_TO_HOST}
        samples: list[float] = []
        timed_out = 0
        deadline = Deadline(self.plan.step_budget_s)
        n_samples = samples_for(size, self.plan)
        for s in range(n_samples + 1):  # sample 0 is a warm-up
            if deadline.passed():
                break
            with gated(self.gate, s0):
                start.record(s0)
                for k, d in enumerate(plan_dirs):
                    stream = streams[d]
                    stream.wait_event(start)
                    for r in range(reps):
                        off = ((s * reps + r) % slots) * size
                        rt.memcpyAsync(dst[d] + off, src[d] + off, size, kind[d], stream.ptr)
                    ends[k].record(stream)
            for k in range(len(plan_dirs)):
                ends[k].synchronize()
            if not self.gate.released_in_time():
                timed_out += 1
                continue
            if s == 0:
                continue
            seconds = max(elapsed_us(cp, start, ends[k]) for k in range(len(plan_dirs))) / 1e6
            samples.append(gbps(size * reps * len(plan_dirs), seconds))
        if not samples:
            raise RuntimeError(f"no valid sample ({timed_out} gate timeouts)")
        return samples

    def _pageable_samples(self, direction: str, size: int) -> list[float]:
        copy = self._copy_fn(direction, "pageable")
        null_stream = self.cp.cuda.Stream.null
        reps = copies_per_sample(size, self.plan)
        slots = self.cap // size
        samples: list[float] = []
        deadline = Deadline(self.plan.step_budget_s)
        perf = time.perf_counter_ns
        for s in range(samples_for(size, self.plan) + 1):  # sample 0 is a warm-up
            if deadline.passed():
                break
            t0 = perf()
            for r in range(reps):
                copy(((s * reps + r) % slots) * size, size)
            null_stream.synchronize()
            t1 = perf()
            if s:
                samples.append(gbps(size * reps, (t1 - t0) / 1e9))
        return samples

    # --- small-copy latency -------------------------------------------------------------
    def small_copy_latency(self, direction: str) -> tuple[Stat, Stat]:
        """One 16-byte pinned copy: GPU time between events (gated), and the host round
        trip of cudaMemcpyAsync + cudaStreamSynchronize."""
        cp, rt = self.cp, self.rt
        stream = self.streams[1]
        size = SMALL_COPY_BYTES
        slots = self.cap // size
        if direction == "h2d":
            src, dst, kind = self.pinned_src.host_ptr, self.dev_dst.ptr, MEMCPY_HOST_TO_DEVICE
        else:
            src, dst, kind = self.dev_src.ptr, self.pinned_dst.host_ptr, MEMCPY_DEVICE_TO_HOST
        start, end = cp.cuda.Event(), cp.cuda.Event()
        gpu_us: list[float] = []
        host_us: list[float] = []
        deadline = Deadline(self.plan.step_budget_s)
        perf = time.perf_counter_ns
        stride = 4099  # a prime number of slots between copies: no two share a cache line
        for i in range(self.plan.pcie_small_copy_samples + 1):
            if deadline.passed():
                break
            off = ((i * stride) % slots) * size
            with gated(self.gate, stream):
                start.record(stream)
                rt.memcpyAsync(dst + off, src + off, size, kind, stream.ptr)
                end.record(stream)
            end.synchronize()
            released = self.gate.released_in_time()
            off2 = (((i + 1) * stride + 1) % slots) * size
            t0 = perf()
            rt.memcpyAsync(dst + off2, src + off2, size, kind, stream.ptr)
            stream.synchronize()
            t1 = perf()
            if i == 0 or not released:
                continue
            gpu_us.append(elapsed_us(cp, start, end))
            host_us.append((t1 - t0) / 1e3)
        if not gpu_us:
            raise RuntimeError("no valid sample: every gate timed out")
        name = direction.upper()
        return (
            summarize(gpu_us, unit="us", description=(
                f"GPU time of one {size}-byte pinned {name} cudaMemcpyAsync between CUDA "
                "events, released from a gate (event resolution is about 0.5 us)")),
            summarize(host_us, unit="us", description=(
                f"host clock around one {size}-byte pinned {name} cudaMemcpyAsync + "
                "cudaStreamSynchronize")),
        )


def size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"
