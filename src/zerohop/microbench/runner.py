"""Run the selected microbenchmarks and assemble one `MicrobenchResult`.

The runner never lets one benchmark's failure stop another: each returns its own status
(and each step inside it is isolated the same way). No CUDA device is not a failure but
a "skipped" result saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import zerohop
from zerohop.microbench import launch, pcie, ring
from zerohop.microbench.context import BenchContext
from zerohop.microbench.gpu_env import (
    NoCudaDevice,
    collect_environment,
    cuda_unavailable_reason,
    load_cupy,
    read_clock_state,
)
from zerohop.microbench.kernels import Kernels
from zerohop.microbench.pcie_limit import link_limit
from zerohop.microbench.plan import FULL, QUICK, Plan
from zerohop.microbench.progress import NullProgress, Progress
from zerohop.microbench.schema import (
    BENCHMARK_NAMES,
    BenchmarkResult,
    Environment,
    MicrobenchResult,
    PcieLink,
    overall_status,
    utc_now_iso,
    write_microbench,
)


class BenchmarkSpec(NamedTuple):
    step_count: Callable[[Plan], int]
    run: Callable[[BenchContext], BenchmarkResult]


BENCHMARKS: dict[str, BenchmarkSpec] = {
    "launch": BenchmarkSpec(launch.step_count, launch.run_launch),
    "ring": BenchmarkSpec(ring.step_count, ring.run_ring),
    "pcie": BenchmarkSpec(pcie.step_count, pcie.run_pcie),
}

ProgressFactory = Callable[[int], Progress]


def parse_only(text: str | None) -> list[str]:
    """`--only launch,ring` -> ["launch", "ring"] in the canonical order; None -> all."""
    if text is None or not text.strip():
        return list(BENCHMARK_NAMES)
    wanted = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [w for w in wanted if w not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARK_NAMES)}")
    return [name for name in BENCHMARK_NAMES if name in wanted]


def total_steps(names: Sequence[str], plan: Plan) -> int:
    return sum(BENCHMARKS[name].step_count(plan) for name in names)


def skipped_result(detail: str) -> MicrobenchResult:
    return MicrobenchResult(
        status="skipped",
        reason=f"no CUDA device found: {detail}",
        created_at=utc_now_iso(),
        zerohop_version=zerohop.__version__,
    )


def run_microbench(
    out_path: Path,
    *,
    quick: bool = True,
    only: Sequence[str] | None = None,
    device: int = 0,
    progress_factory: ProgressFactory = lambda total: NullProgress(),
) -> MicrobenchResult:
    """Run (all, or `only`) the benchmarks with the quick or full preset and write the
    result to `out_path` (a run folder's microbench.json). No GPU: a "skipped" result."""
    names = list(BENCHMARK_NAMES) if only is None else parse_only(",".join(only))
    plan = QUICK if quick else FULL
    result = run_benchmarks(names, plan, device=device, progress_factory=progress_factory)
    write_microbench(result, out_path)
    return result


def cuda_available(device: int = 0) -> tuple[bool, str | None]:
    """(True, None) when a CUDA device and CuPy are usable, else (False, why not)."""
    reason = cuda_unavailable_reason(device)
    return reason is None, reason


def run_benchmarks(
    names: Sequence[str],
    plan: Plan,
    *,
    device: int = 0,
    progress_factory: ProgressFactory = lambda total: NullProgress(),
) -> MicrobenchResult:
    try:
        cp = load_cupy(device)
    except NoCudaDevice as exc:
        return skipped_result(str(exc))
    progress = progress_factory(total_steps(names, plan))
    try:
        environment = collect_environment(cp, device)
    except Exception as exc:  # what the GPU is matters less than measuring it
        environment = Environment()
        progress.note(f"could not read the environment: {type(exc).__name__}: {exc}")
    results: dict[str, BenchmarkResult] = {}
    ctx: BenchContext | None = None
    try:
        kernels = Kernels(cp)
        kernels.compile_all()  # NVRTC and module load stay out of every timing
        props = cp.cuda.runtime.getDeviceProperties(device)
        ctx = BenchContext(
            cp=cp,
            kernels=kernels,
            plan=plan,
            progress=progress,
            device=device,
            sm_count=int(props.get("multiProcessorCount", 1)),
            max_threads_per_sm=int(props.get("maxThreadsPerMultiProcessor", 2048)),
            can_map_host_memory=bool(props.get("canMapHostMemory", 1)),
        )
    except Exception as exc:
        why = f"setup failed: {type(exc).__name__}: {exc}"
        results = {name: BenchmarkResult(status="failed", reason=why) for name in names}
    if ctx is not None:
        for name in names:
            try:
                results[name] = BENCHMARKS[name].run(ctx)
            except Exception as exc:  # a bug outside the per-step guards
                results[name] = BenchmarkResult(
                    status="failed", reason=f"{type(exc).__name__}: {exc}"
                )
    clocks_after, reasons_after = read_clock_state(cp, device)
    under_load = ctx.link_under_load if ctx is not None else None
    environment = environment.model_copy(
        update={
            "clocks_after": clocks_after,
            "clock_event_reasons_after": reasons_after,
            "pcie": under_load if under_load is not None else with_limit(environment.pcie),
        }
    )
    status = overall_status(results)
    reason: str | None = None
    if status != "ok":
        reason = "; ".join(
            f"{name}: {result.status} ({result.reason})"
            for name, result in results.items()
            if result.status != "ok"
        )
    return MicrobenchResult(
        status=status,
        reason=reason,
        created_at=utc_now_iso(),
        zerohop_version=zerohop.__version__,
        environment=environment,
        benchmarks=results,
    )


def with_limit(link: PcieLink) -> PcieLink:
    """An idle link's current generation may be trained down: use the maximum NVML
    reports for the limit when no reading under load exists."""
    gen = link.max_gen or link.gen
    width = link.max_width or link.width
    limit, _ = link_limit(gen, width)
    return link.model_copy(update={"theoretical_gbps_per_direction": limit})
