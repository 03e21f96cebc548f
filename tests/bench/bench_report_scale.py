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

`--compare-with OTHER` (a second run of the same size: `--keep` one generated with
`--noise-seed 2`) also times, in fresh processes taking turns with the reports,
`zerohop compare RUN OTHER` (`build_comparison`) and a nightly's judgement as
`zerohop nightly` makes it once its samples ran (two samples a side, the fewest a
profile allows: OTHER and RUN against RUN and OTHER, so four runs' records; each
sample read and summarised once, the history's figures, the gates, compare.html),
each as a ratio to the report's median (issue 42's goal: within 1.5x).

    .venv/bin/python tests/bench/bench_report_scale.py [--records N] [--repeat K]
        [--run-dir DIR | --keep] [--noise-seed S] [--cli]
        [--compare-with OTHER [--jobs compare,nightly]]

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
JOBS = ("report", "compare", "nightly")
COMPARE_RATIO_LIMIT = 1.5  # compare or a nightly's judgement of two runs, to one report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="report this many times")
    parser.add_argument("--run-dir", type=Path, help="report this folder (no generation)")
    parser.add_argument("--keep", action="store_true", help="keep the generated folder")
    parser.add_argument("--noise-seed", type=int, default=1, help="the generated run's noise")
    parser.add_argument("--cli", action="store_true", help="time `zerohop report RUN_DIR`")
    parser.add_argument("--compare-with", type=Path, help="time compare and nightly too")
    parser.add_argument("--jobs", default=",".join(JOBS[1:]),
                        help="with --compare-with: which of compare,nightly to time")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-job", choices=JOBS, default="report", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress in a log
    if args.child:
        print(json.dumps(_job_once(args.child_job, args.child, args.compare_with)))
        return 0

    root = None if args.run_dir else Path(tempfile.mkdtemp(prefix="zerohop-bench-report-"))
    try:
        run_dir = args.run_dir or _generate(root, args)  # type: ignore[arg-type]
        results: list[dict[str, Any]] = []
        others: dict[str, list[dict[str, Any]]] = (
            {job: [] for job in JOBS[1:] if job in args.jobs.split(",")}
            if args.compare_with else {})
        for _ in range(args.repeat):  # taking turns: a busy spell slows every job alike
            results.append(_report_in_child(run_dir, args.cli))
            for job, timed in others.items():
                timed.append(_job_in_child(job, run_dir, args.compare_with))
        code = _verdict(results, run_dir, args)
        for job, timed in others.items():
            code |= _job_verdict(job, timed, results)
        return code
    finally:
        if root is not None and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        elif root is not None:
            print(f"kept: {root}", flush=True)


def _generate(root: Path, args: argparse.Namespace) -> Path:
    started = time.perf_counter()
    run_dir = generate_run(root, args.records, args.hours, args.gpus, args.noise_seed)
    sizes = {p.name: p.stat().st_size for p in run_dir.iterdir() if p.is_file()}
    print(
        f"generated {args.records:,} records, {args.hours:g} h x {args.gpus} GPUs of 100 ms "
        f"telemetry in {time.perf_counter() - started:.1f} s: "
        + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sorted(sizes.items()))
    )
    return run_dir


def generate_run(root: Path, records: int, hours: float = 1.0, gpus: int = 8,
                 noise_seed: int = 1) -> Path:
    """The bench's run: two workloads of 1–64 output tokens, `hours` of 100 ms
    telemetry for `gpus` GPUs, four LoRA adapters; seeded, so the same every time
    (another `noise_seed`: the same requests, other latencies, for a comparison)."""
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
        noise_seed=noise_seed,
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


def _job_in_child(job: str, run_dir: Path, other: Path) -> dict[str, Any]:
    """One compare or nightly judgement in a fresh process: wall, CPU, peak RSS."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(run_dir),
               "--child-job", job, "--compare-with", str(other)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{job} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    print(f"  {job}: {wall:.1f} s wall, {result['cpu_s']:.1f} s CPU, "
          f"peak RSS {result['peak_rss_bytes'] / 1e9:.2f} GB")
    return result


def _job_once(job: str, run_dir: Path, other: Path | None) -> dict[str, Any]:
    """The job, as its command does it: `report` (steps timed), `compare` (what
    `zerohop compare RUN OTHER` writes), `nightly` (what `zerohop nightly` does with
    its samples once they ran: OTHER judged against RUN as the baseline)."""
    if job == "report":
        return _report_once(run_dir)
    assert other is not None
    with tempfile.TemporaryDirectory(prefix="zerohop-bench-") as out:
        if job == "compare":
            from zerohop.report.build import build_comparison

            build_comparison([run_dir, other], Path(out) / "compare.html")
        else:
            from zerohop.planning.nightly import CompareConfig
            from zerohop.planning.nightly_gates import Samples, compare_samples, sample_figures
            from zerohop.planning.nightly_page import write_comparison_page

            settings = CompareConfig()  # a nightly has two samples a side at least
            samples = Samples.load([other, run_dir], "candidate", pooled_summary=True)
            sample_figures(samples, settings.metrics)
            _, comparison = compare_samples(Samples.load([run_dir, other], "baseline"),
                                            samples, settings)
            write_comparison_page(comparison, Path(out) / "compare.html")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"peak_rss_bytes": usage.ru_maxrss * 1024, "cpu_s": usage.ru_utime + usage.ru_stime}


def _job_verdict(job: str, timed: list[dict[str, Any]], reports: list[dict[str, Any]]) -> int:
    wall = statistics.median(r["wall_s"] for r in timed)
    cpu = statistics.median(r["cpu_s"] for r in timed)
    ratio = wall / statistics.median(r["wall_s"] for r in reports)
    cpu_ratio = cpu / statistics.median(r["cpu_s"] for r in reports)
    ok = ratio <= COMPARE_RATIO_LIMIT
    print(f"{job}, median of {len(timed)}: {wall:.1f} s wall, {ratio:.2f}x the report's "
          f"({'OK' if ok else 'OVER'}, limit {COMPARE_RATIO_LIMIT:g}x); {cpu:.1f} s CPU, "
          f"{cpu_ratio:.2f}x; peak RSS {max(r['peak_rss_bytes'] for r in timed) / 1e9:.2f} GB")
    return 0 if ok else 1


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
