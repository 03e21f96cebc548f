"""The printed summary of a microbench result, and the issue's goals checked against it.

Pure functions of a `MicrobenchResult`: what the terminal shows is what the JSON holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from zerohop.microbench.pcie import SERIES, size_text
from zerohop.microbench.plan import HEADLINE_PCIE_SIZE
from zerohop.microbench.schema import Clocks, CurvePoint, Environment, MicrobenchResult, Stat

PINNED_GOAL_PCT = 85.0


@dataclass(frozen=True)
class GoalCheck:
    goal: str
    met: bool | None  # None: not measured in this run
    detail: str

    @property
    def label(self) -> str:
        return {True: "MET", False: "MISSED", None: "n/a"}[self.met]


def evaluate_goals(result: MicrobenchResult) -> list[GoalCheck]:
    """Pinned copies >= 85% of the link's per-direction limit at 256 MiB; the ring's
    round-trip p50 below the launch + synchronise round trip p50."""
    checks = [_pinned_goal(result, d) for d in ("h2d", "d2h")]
    checks.append(_ring_goal(result))
    return checks


def _pinned_goal(result: MicrobenchResult, direction: str) -> GoalCheck:
    goal = f"pinned {direction.upper()} at 256 MiB >= {PINNED_GOAL_PCT:g}% of the link"
    point = _curve_point(result, direction, "pinned", HEADLINE_PCIE_SIZE)
    limit = result.environment.pcie.theoretical_gbps_per_direction
    if point is None:
        return GoalCheck(goal, None, "not measured")
    if point.pct_of_link is None or limit is None:
        return GoalCheck(goal, None, f"{point.gbps.median:.1f} GB/s; link limit unknown")
    return GoalCheck(
        goal,
        point.pct_of_link >= PINNED_GOAL_PCT,
        f"{point.gbps.median:.1f} GB/s = {point.pct_of_link:.1f}% of {limit:.1f} GB/s",
    )


def _ring_goal(result: MicrobenchResult) -> GoalCheck:
    goal = "ring round trip p50 < launch + sync round trip p50"
    ring = _metric(result, "ring", "ring_roundtrip_us")
    baseline = _metric(result, "launch", "launch_sync_roundtrip_us")
    if ring is None or baseline is None:
        return GoalCheck(goal, None, "needs both the ring and the launch benchmark")
    return GoalCheck(
        goal,
        ring.p50 < baseline.p50,
        f"ring {ring.p50:.2f} us vs launch + sync {baseline.p50:.2f} us "
        f"(p99 {ring.p99:.2f} vs {baseline.p99:.2f})",
    )


def format_table(result: MicrobenchResult) -> str:
    lines = [f"zerohop microbench: {result.status}"]
    if result.reason:
        lines.append(f"  reason: {result.reason}")
    if result.status == "skipped":
        return "\n".join(lines) + "\n"
    lines += _environment_lines(result.environment)
    lines.append("")
    header = f"{'benchmark':<9} {'metric':<38} {'median':>11} {'p99':>11} {'min':>11} " \
             f"{'max':>11} {'unit':<14} {'n':>6}"
    lines += [header, "-" * len(header)]
    for name, bench in result.benchmarks.items():
        if not bench.metrics:
            lines.append(f"{name:<9} ({bench.status}: {bench.reason})")
        for metric, stat in bench.metrics.items():
            lines.append(_metric_row(name, metric, stat))
    pcie = result.benchmarks.get("pcie")
    if pcie is not None and pcie.curve:
        lines += ["", *_curve_lines(pcie.curve)]
    lines += ["", "goals:"]
    lines += [f"  [{c.label:^6}] {c.goal}: {c.detail}" for c in evaluate_goals(result)]
    problems = [(n, b) for n, b in result.benchmarks.items() if b.status != "ok"]
    if problems:
        lines += ["", "problems:"]
        lines += [f"  {n}: {b.status}: {b.reason}" for n, b in problems]
    return "\n".join(lines) + "\n"


def format_number(value: float) -> str:
    if abs(value) >= 10_000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _metric_row(bench: str, metric: str, stat: Stat) -> str:
    cells = [format_number(v) for v in (stat.median, stat.p99, stat.min, stat.max)]
    return (
        f"{bench:<9} {metric:<38} {cells[0]:>11} {cells[1]:>11} {cells[2]:>11} "
        f"{cells[3]:>11} {stat.unit:<14} {stat.n:>6}"
    )


def _environment_lines(env: Environment) -> list[str]:
    link = env.pcie
    limit = (
        f"{link.theoretical_gbps_per_direction:.1f} GB/s per direction"
        if link.theoretical_gbps_per_direction
        else "limit unknown"
    )
    return [
        f"  GPU: {_na(env.gpu_name)} ({_na(env.gpu_uuid)}), compute "
        f"{_na(env.compute_capability)}, {_na(env.sm_count)} SMs",
        f"  driver {_na(env.driver_version)} (CUDA {_na(env.cuda_driver_version)}), runtime "
        f"{_na(env.cuda_runtime_version)}, CuPy {_na(env.cupy_version)}",
        f"  PCIe: {_link(link.gen, link.width)} (max {_link(link.max_gen, link.max_width)}): "
        f"{limit}",
        f"  clocks before: {_clocks(env.clocks_before, env.clock_event_reasons_before)}",
        f"  clocks after:  {_clocks(env.clocks_after, env.clock_event_reasons_after)}",
    ]


def _na(value: object) -> str:
    return "n/a" if value is None else str(value)


def _link(gen: int | None, width: int | None) -> str:
    return "unknown" if gen is None or width is None else f"Gen{gen} x{width}"


def _clocks(clocks: Clocks, reasons: list[str]) -> str:
    events = ",".join(reasons) if reasons else "n/a"
    return (
        f"SM {_na(clocks.sm_mhz)} MHz, memory {_na(clocks.mem_mhz)} MHz, "
        f"clock events: {events}"
    )


def _curve_lines(curve: list[CurvePoint]) -> list[str]:
    columns = [f"{d}/{m}" for d, m in SERIES]
    by_key: dict[tuple[str, str, int], CurvePoint] = {
        (p.direction, p.memory, p.size_bytes): p for p in curve
    }
    sizes = sorted({p.size_bytes for p in curve})
    lines = ["PCIe sweep, GB/s (median; '!' = data not verified, % of link in brackets)"]
    lines.append(f"{'size':>9} " + " ".join(f"{c:>16}" for c in columns))
    for size in sizes:
        cells = []
        for direction, memory in SERIES:
            point = by_key.get((direction, memory, size))
            if point is None:
                cells.append(f"{'-':>16}")
                continue
            pct = "" if point.pct_of_link is None else f" ({point.pct_of_link:.0f}%)"
            mark = "" if point.verified else "!"
            cells.append(f"{format_number(point.gbps.median) + pct + mark:>16}")
        lines.append(f"{size_text(size):>9} " + " ".join(cells))
    return lines


def _curve_point(
    result: MicrobenchResult, direction: str, memory: str, size: int
) -> CurvePoint | None:
    bench = result.benchmarks.get("pcie")
    for point in (bench.curve or []) if bench else []:
        if (point.direction, point.memory, point.size_bytes) == (direction, memory, size):
            return point
    return None


def _metric(result: MicrobenchResult, bench: str, metric: str) -> Stat | None:
    found = result.benchmarks.get(bench)
    return None if found is None else found.metrics.get(metric)
