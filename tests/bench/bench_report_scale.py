"""Scale benchmark for `zerohop report` (a script, not a timed test).

The goal (a nightly hour at 3k req/s): 10,000,000 request records (two workloads,
1–64 output tokens each, so ~310 million pooled ITL values) and one hour of telemetry
at 100 ms for 8 GPUs (8 NVML lanes per GPU + server and load-generator lanes: ~2.5
million rows) reported in under 30 s and 4 GB peak memory on the project's 2-core
machine, with report.html under 8 MB (issue 42; docs/report-scale.md has the figures).

The run is generated here (a million records per row group, about a minute for ten
million), then reported in a fresh child process per repeat, so neither the
generator's memory nor its imports count: the child runs `build_report` and prints
its steps' seconds (load, analyse, present, render), its CPU seconds and its peak
RSS. After the reports, the floor: the CPU seconds pyarrow alone takes to read the
Parquet columns the report reads (`floor_cpu_seconds`), so a slowdown shows as a
ratio that a busy machine moves little (tests/report/test_report_scale_guard.py
judges it at 1M). `--cli` reports with `zerohop report RUN_DIR` instead, exactly as a user runs it
(totals only; it also times a zerohop without the step timings).

    .venv/bin/python tests/bench/bench_report_scale.py [--records N] [--repeat K]
        [--run-dir DIR | --keep] [--cli]

Numbers on a shared machine are noisy: quote the median of several repeats, and
compare two versions side by side in one session (`--run-dir` reuses one folder).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.synthetic_runs when run as a script

TIME_LIMIT_S = 30.0
RSS_LIMIT_BYTES = 4e9
SIZE_LIMIT_BYTES = 8_000_000
PHASES = ("load", "analyse", "present", "render")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="report this many times")
    parser.add_argument("--run-dir", type=Path, help="report this folder (no generation)")
    parser.add_argument("--keep", action="store_true", help="keep the generated folder")
    parser.add_argument("--cli", action="store_true", help="time `zerohop report RUN_DIR`")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress in a log
    if args.child:
        print(json.dumps(_report_once(args.child)))
        return 0

    root = None if args.run_dir else Path(tempfile.mkdtemp(prefix="zerohop-bench-report-"))
    try:
        run_dir = args.run_dir or _generate(root, args)  # type: ignore[arg-type]
        results = [_report_in_child(run_dir, args.cli) for _ in range(args.repeat)]
        return _verdict(results, run_dir, args)
    finally:
        if root is not None and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        elif root is not None:
            print(f"kept: {root}", flush=True)


def _generate(root: Path, args: argparse.Namespace) -> Path:
    started = time.perf_counter()
    run_dir = generate_run(root, args.records, args.hours, args.gpus)
    sizes = {p.name: p.stat().st_size for p in run_dir.iterdir() if p.is_file()}
    print(
        f"generated {args.records:,} records, {args.hours:g} h x {args.gpus} GPUs of 100 ms "
        f"telemetry in {time.perf_counter() - started:.1f} s: "
        + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sorted(sizes.items()))
    )
    return run_dir


def generate_run(root: Path, records: int, hours: float = 1.0, gpus: int = 8) -> Path:
    """The bench's run: two workloads of 1–64 output tokens, `hours` of 100 ms
    telemetry for `gpus` GPUs, four LoRA adapters; seeded, so the same every time."""
    from tests.synthetic_runs import SyntheticRun, WorkloadModel, write_run

    spec = SyntheticRun(
        n_requests=records,
        duration_s=hours * 3600.0,
        workloads=(
            WorkloadModel("chat", 0.6, 400.0, 64),
            WorkloadModel("summarise", 0.4, 3000.0, 64),
        ),
        telemetry_interval_s=0.1,
        gpus=gpus,
        adapters=("adapter-a", "adapter-b", "adapter-c", "adapter-d"),
        name="scale",
    )
    return write_run(root, spec)


def floor_cpu_seconds(run_dir: Path, repeat: int = 3) -> float:
    """CPU seconds pyarrow takes, on one thread, to read the Parquet columns the
    report reads (the analysis' request columns, the ITL lists, telemetry) into Arrow
    and nothing more: what no report of this folder can beat. The least of `repeat`
    reads: a busy machine only ever adds to it."""
    import pyarrow.parquet as pq

    from zerohop.analysis.run_data import LIST_COLUMN, REQUEST_COLUMNS, TELEMETRY_COLUMNS

    requests = run_dir / "requests.parquet"
    names = set(pq.read_schema(requests).names)
    wanted = [c for c in (*REQUEST_COLUMNS, LIST_COLUMN) if c in names]
    spent = []
    for _ in range(repeat):
        started = time.process_time()
        pq.read_table(requests, columns=wanted, use_threads=False)
        pq.read_table(run_dir / "telemetry.parquet", columns=list(TELEMETRY_COLUMNS),
                      use_threads=False)
        spent.append(time.process_time() - started)
    return min(spent)


def _report_in_child(run_dir: Path, cli: bool) -> dict[str, Any]:
    """One report in a fresh process: wall seconds (interpreter start included) and,
    unless `cli`, the child's own phase seconds and peak RSS."""
    if cli:
        command = [sys.executable, "-m", "zerohop", "report", str(run_dir)]
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "--child", str(run_dir)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"report failed ({done.returncode}):\n{done.stderr[-4000:]}")
    if cli:
        # this process's children are these reports: the largest of them so far
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result: dict[str, Any] = {
            "peak_rss_bytes": after.ru_maxrss * 1024,
            "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        }
    else:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    result["html_bytes"] = (run_dir / "report.html").stat().st_size
    print(
        f"  report: {wall:.1f} s wall, peak RSS {result['peak_rss_bytes'] / 1e9:.2f} GB"
        + (f", {result['cpu_s']:.1f} s CPU" if "cpu_s" in result else "")
        + "".join(f", {p} {result[p]:.1f} s" for p in PHASES if p in result)
    )
    return result


def _report_once(run_dir: Path) -> dict[str, Any]:
    """`zerohop.report.build_report` with default settings, its steps timed."""
    from zerohop.report import build_report

    seconds: dict[str, Any] = {}
    build_report(run_dir, timings=seconds)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    seconds["peak_rss_bytes"] = usage.ru_maxrss * 1024
    seconds["cpu_s"] = usage.ru_utime + usage.ru_stime  # less noisy than wall when shared
    return seconds


def _verdict(results: list[dict[str, Any]], run_dir: Path, args: argparse.Namespace) -> int:
    wall = statistics.median(r["wall_s"] for r in results)
    cpu = statistics.median(r["cpu_s"] for r in results)
    peak = max(r["peak_rss_bytes"] for r in results)
    size = results[-1]["html_bytes"]
    phases = [
        f"{p} {statistics.median(r[p] for r in results):.1f} s" for p in PHASES if p in results[0]
    ]
    floor = floor_cpu_seconds(run_dir, repeat=1)  # after the reports: the page cache is warm
    phases.append(f"floor (pyarrow reads its columns, one thread) {floor:.1f} s CPU, "
                  f"report CPU/floor {cpu / floor:.1f}x")
    ok_time, ok_rss, ok_size = wall < TIME_LIMIT_S, peak < RSS_LIMIT_BYTES, size < SIZE_LIMIT_BYTES
    print(
        f"{'zerohop report' if args.cli else 'build_report'} of {run_dir.name}, median of "
        f"{len(results)}: {wall:.1f} s ({'OK' if ok_time else 'OVER'}, limit "
        f"{TIME_LIMIT_S:g} s), {cpu:.1f} s CPU; peak RSS {peak / 1e9:.2f} GB "
        f"({'OK' if ok_rss else 'OVER'}, limit {RSS_LIMIT_BYTES / 1e9:g} GB); "
        f"report.html {size / 1e6:.2f} MB "
        f"({'OK' if ok_size else 'OVER'}, limit {SIZE_LIMIT_BYTES / 1e6:g} MB)"
        + (f"; {', '.join(phases)}" if phases else "")
    )
    return 0 if ok_time and ok_rss and ok_size else 1


if __name__ == "__main__":
    raise SystemExit(main())
