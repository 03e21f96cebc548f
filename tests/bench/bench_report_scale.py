"""Scale benchmark for `zerohop report` (a script, not a timed test).

Generates, in a temporary folder, a run of 1,000,000 request records (two workloads,
1–64 output tokens each, so ~32 million pooled ITL values) and one hour of telemetry
at 100 ms for 8 GPUs (8 NVML lanes per GPU + server and load-generator lanes:
~2.7 million rows), then times `build_report` and prints the seconds and the file
size. Target: under 20 s and under 8 MB on the project's 2-core machine.

    /work/venv/bin/python tests/bench/bench_report_scale.py [--records N] [--keep]

Numbers on a shared machine are noisy: run it twice and quote both.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.synthetic_runs when run as a script

from tests.synthetic_runs import SyntheticRun, WorkloadModel, write_run  # noqa: E402

from zerohop.report import build_report  # noqa: E402

TIME_LIMIT_S = 20.0
SIZE_LIMIT_BYTES = 8_000_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="keep the folder and print it")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="zerohop-bench-report-"))
    try:
        spec = SyntheticRun(
            n_requests=args.records,
            duration_s=args.hours * 3600.0,
            workloads=(
                WorkloadModel("chat", 0.6, 400.0, 64),
                WorkloadModel("summarise", 0.4, 3000.0, 64),
            ),
            telemetry_interval_s=0.1,
            gpus=args.gpus,
            adapters=("adapter-a", "adapter-b", "adapter-c", "adapter-d"),
            name="scale",
        )
        started = time.perf_counter()
        run_dir = write_run(root, spec)
        generated_s = time.perf_counter() - started
        sizes = {p.name: p.stat().st_size for p in run_dir.iterdir() if p.is_file()}
        print(
            f"generated in {generated_s:.1f} s: "
            + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sorted(sizes.items()))
        )

        started = time.perf_counter()
        out = build_report(run_dir)
        elapsed = time.perf_counter() - started
        size = out.stat().st_size
        verdict_time = "OK" if elapsed < TIME_LIMIT_S else "OVER"
        verdict_size = "OK" if size < SIZE_LIMIT_BYTES else "OVER"
        print(
            f"build_report: {elapsed:.2f} s ({verdict_time}, limit {TIME_LIMIT_S:g} s); "
            f"report.html {size / 1e6:.2f} MB ({verdict_size}, limit "
            f"{SIZE_LIMIT_BYTES / 1e6:g} MB); {args.records:,} records, "
            f"{args.hours:g} h x {args.gpus} GPUs of 100 ms telemetry"
        )
        if args.keep:
            print(f"kept: {out}")
        return 0 if verdict_time == verdict_size == "OK" else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
