"""Plausible ranges for every figure the microbenchmarks report, in one place.

`status == "ok"` and `> 0` pass a µs/ms slip, swapped stream priorities or a copy
that never crossed the link. A figure outside its range here is such a bug, not a slow
machine: each range is about an order of magnitude wide on either side of the committed
H200 reference (microbench/reference/nvidia-h200.json, quoted as "ref"), so any
datacenter GPU on PCIe fits and a factor-1000 unit slip does not; copies are bounded by
the link NVML reports (zerohop.microbench.pcie_limit), below by half of it (the H200
moves 87 %) and above by the link itself, which no copy can beat. Orderings that hold on
every GPU are checked too: the high-priority stream well ahead of the low one, the ring
ahead of launch + sync. Every check reads the median (p50).

`plausibility_violations(result)` takes a `microbench.json` document (or the parsed
model) and lists what is out of range; the real-GPU tests and the pytest-benchmark entry
points (microbench/conftest.py) assert the list is empty. A test oracle for the
benchmarks' own code (the product calls none of it), so it lives in tests/.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zerohop.microbench.schema import MicrobenchResult, Stat, parse_microbench

US = "us"
GBPS = "GB/s"
PER_S = "descriptors/s"
MiB = 1 << 20

# The pinned-H2D floor applies to copies this large or larger: per-copy overhead is
# noise there (ref: 84 % of the link at 4 MiB, 75 % at 1 MiB).
LARGE_COPY_BYTES = 4 * MiB
MIN_LINK_FRACTION = 0.5
# The high-priority kernel waits for one block of the long kernel (20 µs) and the low one
# for all of it (5-20 ms): ref 33 µs against 19 623 µs; half is a margin any GPU keeps.
PRIORITY_MAX_RATIO = 0.5


@dataclass(frozen=True)
class Range:
    """Closed range [low, high] in `unit`; None leaves that side open. `link_fraction`
    bounds are multiples of the link's per-direction limit instead of fixed figures."""

    unit: str
    low: float | None
    high: float | None
    why: str
    required: bool = False  # must be present whenever its benchmark ran ok
    link_fraction: bool = False


@dataclass(frozen=True)
class Violation:
    figure: str  # "launch.launch_sync_roundtrip_us p50"
    value: float | None  # None: the figure is missing
    unit: str
    expected: str  # "between 2 and 100 us (launch + sync, ref 12.6 us)"

    def __str__(self) -> str:
        shown = "missing" if self.value is None else f"{self.value:.6g} {self.unit}"
        return f"{self.figure} = {shown}; expected {self.expected}"


PINNED_ONE_WAY = Range(GBPS, MIN_LINK_FRACTION, 1.0, "pinned DMA, ref 87 % of the link",
                       link_fraction=True)
_SIZE = r"(?:_\d+B)?"  # the ring's non-headline descriptor sizes (`_16B`)
# (benchmark, metric-name pattern, range); the first pattern that matches a name rules it.
RANGES: tuple[tuple[str, str, Range], ...] = (
    ("launch", "async_launch_us", Range(
        US, 0.2, 20, "GPU time per back-to-back empty kernel, ref 1.37 us", required=True)),
    ("launch", "async_launch_host_us", Range(
        US, 0.5, 200, "one CuPy launch call on the host, ref 7.7 us", required=True)),
    ("launch", "launch_sync_roundtrip_us", Range(
        US, 2, 100, "launch + sync, ref 12.6 us", required=True)),
    ("launch", "graph_replay_per_node_us", Range(
        US, 0.05, 10, "per node of a graph replay, ref 0.54 us", required=True)),
    ("launch", "graph_launch_host_us", Range(
        US, 0.5, 500, "one cudaGraphLaunch call on the host, ref 3.1 us", required=True)),
    ("launch", "small_kernel_latency_high_prio_us", Range(
        US, 2, 5_000, "admitted at the next block boundary of the long kernel, ref 33 us",
        required=True)),
    ("launch", "small_kernel_latency_low_prio_us", Range(
        US, 500, 500_000, "waits for the 5-20 ms long kernel, ref 19 623 us", required=True)),
    ("ring", rf"ring_roundtrip{_SIZE}_us", Range(
        US, 1, 100, "two PCIe crossings through mapped memory, ref 5.3 us", required=True)),
    ("ring", rf"ring_descriptors{_SIZE}_per_s", Range(
        PER_S, 1e4, 1e7, "one consumer warp, ref 274 000 /s", required=True)),
    ("ring", rf"launch_per_request_roundtrip{_SIZE}_us", Range(
        US, 2, 100, "one launch and an ack, as launch + sync; ref 14.4 us", required=True)),
    ("ring", rf"memcpy_launch_roundtrip{_SIZE}_us", Range(
        US, 2, 200, "a copy, a launch and an ack, ref 15.5 us", required=True)),
    ("pcie", r"(h2d|d2h)_pinned_\d+MiB_gbps", PINNED_ONE_WAY),
    ("pcie", r"bidir_pinned_\d+MiB_gbps", Range(
        GBPS, MIN_LINK_FRACTION, 2.0, "both directions at once, ref 142 % of one direction",
        link_fraction=True)),
    ("pcie", r"(h2d|d2h)_pageable_\d+MiB_gbps", Range(
        GBPS, 0.01, 1.0, "staged through host memory, ref 11-17 % of the link",
        link_fraction=True)),
    ("pcie", r"(h2d|d2h)_small_copy_latency_us", Range(
        US, 0.5, 100, "one 16-byte copy between events, ref 3.9-7.2 us", required=True)),
    ("pcie", r"(h2d|d2h)_small_copy_roundtrip_us", Range(
        US, 1, 200, "one 16-byte copy + sync on the host, ref 7.7-8.7 us", required=True)),
)
# A required pattern with alternatives is required in each form listed here.
_REQUIRED_NAMES: dict[str, tuple[str, ...]] = {
    rf"ring_roundtrip{_SIZE}_us": ("ring_roundtrip_us",),
    rf"ring_descriptors{_SIZE}_per_s": ("ring_descriptors_per_s",),
    rf"launch_per_request_roundtrip{_SIZE}_us": ("launch_per_request_roundtrip_us",),
    rf"memcpy_launch_roundtrip{_SIZE}_us": ("memcpy_launch_roundtrip_us",),
    r"(h2d|d2h)_small_copy_latency_us": ("h2d_small_copy_latency_us",
                                         "d2h_small_copy_latency_us"),
    r"(h2d|d2h)_small_copy_roundtrip_us": ("h2d_small_copy_roundtrip_us",
                                           "d2h_small_copy_roundtrip_us"),
}


def range_for(benchmark: str, metric: str) -> Range | None:
    for bench, pattern, rng in RANGES:
        if bench == benchmark and re.fullmatch(pattern, metric):
            return rng
    return None


def _required_names(benchmark: str) -> list[str]:
    names: list[str] = []
    for bench, pattern, rng in RANGES:
        if bench == benchmark and rng.required:
            names.extend(_REQUIRED_NAMES.get(pattern, (pattern,)))
    return names


def _bounds_text(low: float | None, high: float | None, unit: str) -> str:
    if low is not None and high is not None:
        return f"between {low:.4g} and {high:.4g} {unit}"
    if low is not None:
        return f"at least {low:.4g} {unit}"
    return f"at most {high:.4g} {unit}"


def _check_stat(
    figure: str, stat: Stat, rng: Range, link_gbps: float | None
) -> list[Violation]:
    value = stat.p50
    if stat.unit != rng.unit:
        return [Violation(figure, value, stat.unit, f"unit {rng.unit!r} ({rng.why})")]
    low, high, why = rng.low, rng.high, rng.why
    if rng.link_fraction:
        if link_gbps is None:
            return [Violation(figure, value, stat.unit,
                              "a PCIe link limit from NVML to compare with; none reported")]
        why = f"{why}; {_bounds_text(low, high, 'x')} the {link_gbps:.1f} GB/s link"
        low = None if low is None else low * link_gbps
        high = None if high is None else high * link_gbps
    if (low is not None and value < low) or (high is not None and value > high):
        return [Violation(figure, value, stat.unit, f"{_bounds_text(low, high, rng.unit)} "
                                                    f"({why})")]
    return []


def _check_ranges(result: MicrobenchResult, link_gbps: float | None) -> list[Violation]:
    found: list[Violation] = []
    for bench_name, bench in result.benchmarks.items():
        for metric, stat in bench.metrics.items():
            figure = f"{bench_name}.{metric} p50"
            rng = range_for(bench_name, metric)
            if rng is None:
                found.append(Violation(figure, stat.p50, stat.unit,
                                       "a plausible range in tests.microbench.plausibility"))
            else:
                found.extend(_check_stat(figure, stat, rng, link_gbps))
        if bench.status == "ok":
            for name in _required_names(bench_name):
                if name not in bench.metrics:
                    rng = range_for(bench_name, name)
                    unit = rng.unit if rng else ""
                    found.append(Violation(f"{bench_name}.{name} p50", None, unit,
                                           "the figure to be measured"))
    return found


def _check_large_pinned_h2d(result: MicrobenchResult, link_gbps: float | None) -> list[Violation]:
    """Pinned H2D above half the link, read off the sweep's largest copy (the smoke plan
    has no 256 MiB headline figure)."""
    pcie = result.benchmarks.get("pcie")
    if pcie is None or pcie.status != "ok":
        return []
    points = [p for p in pcie.curve or [] if p.direction == "h2d" and p.memory == "pinned"]
    large = [p for p in points if p.size_bytes >= LARGE_COPY_BYTES]
    figure = f"pcie.curve h2d pinned >= {LARGE_COPY_BYTES // MiB} MiB p50"
    if not large:
        return [Violation(figure, None, GBPS, f"a pinned H2D copy of at least "
                                              f"{LARGE_COPY_BYTES // MiB} MiB in the sweep")]
    top = max(large, key=lambda p: p.size_bytes)
    figure = f"pcie.curve h2d pinned {top.size_bytes // MiB} MiB p50"
    return _check_stat(figure, top.gbps, PINNED_ONE_WAY, link_gbps)


def _metric(result: MicrobenchResult, bench: str, metric: str) -> Stat | None:
    b = result.benchmarks.get(bench)
    return None if b is None else b.metrics.get(metric)


def _must_be_faster(
    figure: str, fast: Stat | None, slow: Stat | None, factor: float, what: str
) -> list[Violation]:
    """`fast` p50 below `factor` x `slow` p50; nothing to say when either is absent or
    the units differ (the range check reports a wrong unit)."""
    if fast is None or slow is None or fast.unit != slow.unit or fast.p50 < factor * slow.p50:
        return []
    bound = what if factor == 1 else f"{factor:g} x {what}"
    return [Violation(figure, fast.p50, fast.unit, f"below {bound}'s {slow.p50:.6g} {slow.unit}")]


def _check_orderings(result: MicrobenchResult) -> list[Violation]:
    found = _must_be_faster(
        "launch.small_kernel_latency_high_prio_us p50",
        _metric(result, "launch", "small_kernel_latency_high_prio_us"),
        _metric(result, "launch", "small_kernel_latency_low_prio_us"),
        PRIORITY_MAX_RATIO, "the low-priority stream (priorities swapped or ignored?)",
    )
    found += _must_be_faster(
        "ring.ring_roundtrip_us p50", _metric(result, "ring", "ring_roundtrip_us"),
        _metric(result, "launch", "launch_sync_roundtrip_us"), 1, "launch + sync",
    )
    ring_metrics = result.benchmarks["ring"].metrics if "ring" in result.benchmarks else {}
    for metric, stat in ring_metrics.items():
        match = re.fullmatch(rf"ring_roundtrip({_SIZE})_us", metric)
        if match is not None:
            found += _must_be_faster(
                f"ring.{metric} p50", stat,
                ring_metrics.get(f"launch_per_request_roundtrip{match.group(1)}_us"), 1,
                "one launch per request",
            )
    return found


def plausibility_violations(result: Mapping[str, Any] | MicrobenchResult) -> list[Violation]:
    """Every figure outside its plausible range, every required figure missing, every
    ordering broken; [] for a plausible result. A mapping is parsed (and validated) as a
    `microbench.json` document first."""
    parsed = result if isinstance(result, MicrobenchResult) else parse_microbench(result)
    link = parsed.environment.pcie.theoretical_gbps_per_direction
    return [
        *_check_ranges(parsed, link),
        *_check_large_pinned_h2d(parsed, link),
        *_check_orderings(parsed),
    ]
