"""End-of-run benchmark for `zerohop run`: the step after Locust exits (load the
records, analyse, print the summary, write report.html and summary.json), timed as it
is now (one load, one analysis, `report.build.write_report`) and as it was (the report
built from the folder again: `build_report(run_dir)`, a second load and analysis),
side by side in one session (a script, not a timed test).

A synthetic results folder is generated once; each repetition copies it and runs the
runner's own `_finish` in a fresh child process (so neither imports nor the other
mode's memory count), the two modes alternating. The child prints the step's wall and
CPU seconds and its peak RSS; the medians are printed side by side.

    .venv/bin/python tests/bench/bench_run_end.py [--records N] [--repeat K]
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

MODES = ("analysed twice (before)", "analysed once (now)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "RUN_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress in a log
    if args.child:
        print(json.dumps(_finish_once(int(args.child[0]), Path(args.child[1]))))
        return 0
    root = Path(tempfile.mkdtemp(prefix="zerohop-bench-run-end-"))
    try:
        made = _generate(root, args.records)
        results: dict[int, list[dict[str, float]]] = {0: [], 1: []}
        for repetition in range(args.repeat):
            for mode in (0, 1) if repetition % 2 == 0 else (1, 0):
                copy = root / f"copy-{repetition}-{mode}"
                shutil.copytree(made, copy)
                results[mode].append(_in_child(mode, copy))
                shutil.rmtree(copy)
        _print_side_by_side(results, args.records)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _generate(root: Path, records: int) -> Path:
    from tests.synthetic_runs import SyntheticRun, write_run

    started = time.perf_counter()
    run_dir = write_run(root, SyntheticRun(n_requests=records, duration_s=600.0,
                                           name="run-end"))
    print(f"generated {records:,} records in {time.perf_counter() - started:.1f} s")
    return run_dir


def _in_child(mode: int, run_dir: Path) -> dict[str, float]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(mode), str(run_dir)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run's end failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"  {MODES[mode]}: {result['wall_s']:.2f} s wall, {result['cpu_s']:.2f} s CPU, "
          f"peak RSS {result['peak_rss_bytes'] / 1e6:.0f} MB")
    return result


def _finish_once(mode: int, run_dir: Path) -> dict[str, Any]:
    """The runner's `_finish` on `run_dir`; mode 0 puts back the report step as it was
    (`build_report(run_dir)`: the folder loaded and analysed a second time)."""
    import zerohop.report.build as report_build
    from zerohop.runner.plan import RunPlan
    from zerohop.runner.run_once import _finish

    if mode == 0:
        real_write = report_build.write_report

        def as_before(analysis: Any, out: Path, **_: Any) -> Path:
            # `_finish` imported this name when it started; `build_report` itself must
            # find the real one (else it would call back here)
            report_build.write_report = real_write
            return report_build.build_report(Path(out).parent)

        report_build.write_report = as_before  # type: ignore[assignment]
    plan = RunPlan(host="http://127.0.0.1:9", api="openai-chat", workloads=[], classes=[],
                   users=8, rate=None, duration_s=600, telemetry="none", slo={},
                   name="run-end", workers=0, results_dir=run_dir.parent, seed=1)
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    result = _finish(plan, run_dir, 0)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert result.report is not None and result.report.is_file()
    return {"wall_s": wall,
            "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "peak_rss_bytes": after.ru_maxrss * 1024}


def _print_side_by_side(results: dict[int, list[dict[str, float]]], records: int) -> None:
    print(f"end of `zerohop run` on {records:,} records, median of {len(results[0])}:")
    medians = {mode: {key: statistics.median(r[key] for r in results[mode])
                      for key in ("wall_s", "cpu_s", "peak_rss_bytes")} for mode in (0, 1)}
    for mode in (0, 1):
        m = medians[mode]
        print(f"  {MODES[mode]:<24} {m['wall_s']:6.2f} s wall  {m['cpu_s']:6.2f} s CPU  "
              f"peak RSS {m['peak_rss_bytes'] / 1e6:6.0f} MB")
    saved = medians[0]["wall_s"] - medians[1]["wall_s"]
    print(f"  saved: {saved:.2f} s wall ({saved / medians[0]['wall_s']:.0%}), "
          f"{(medians[0]['peak_rss_bytes'] - medians[1]['peak_rss_bytes']) / 1e6:.0f} MB "
          "peak RSS")


if __name__ == "__main__":
    raise SystemExit(main())
