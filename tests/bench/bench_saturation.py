"""zerohop's saturation detector beside GuideLLM's published over-saturation rule, on
planted cases on the virtual clock (a script, not a timed test; docs/saturation.md).

Each case is run with `--seeds` seeds; both detectors watch the same run. Prints, per
case and detector, the median detection delay from the overload's onset (its range
over the seeds) and how many seeds alarmed: for an overload, alarms are detections;
for a control, every alarm is a false one.

    .venv/bin/python tests/bench/bench_saturation.py [--seeds 10] [--nightly-s 600]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests` as a package

from tests.fleet.saturation_cases import Case, capacity_rps, cases, delay, run_case


def _cell(delays: list[float | None], control: bool) -> str:
    alarms = [d for d in delays if d is not None]
    if control:
        return f"{len(alarms)}/{len(delays)} false alarms" + (
            f" (at {min(alarms):.0f}-{max(alarms):.0f} s)" if alarms else "")
    if not alarms:
        return f"never (0/{len(delays)})"
    return (f"{statistics.median(alarms):.0f} s ({min(alarms):.0f}-{max(alarms):.0f}), "
            f"{len(alarms)}/{len(delays)}")


def table(all_cases: list[Case], seeds: int) -> list[str]:
    lines = ["| case | kind | zerohop | GuideLLM's rule |", "|---|---|---|---|"]
    for case in all_cases:
        outcomes = [run_case(case, seed) for seed in range(seeds)]
        control = case.onset_s is None
        ours = [delay(o, case, "zerohop") for o in outcomes]
        theirs = [delay(o, case, "guidellm") for o in outcomes]
        lines.append(f"| {case.name} | {'control' if control else 'overload'} | "
                     f"{_cell(ours, control)} | {_cell(theirs, control)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--nightly-s", type=float, default=600.0)
    args = parser.parse_args()
    started = time.perf_counter()
    all_cases = cases(args.nightly_s)
    for sizes in sorted({c.sizes for c in all_cases}, key=lambda s: s.prompt):
        print(f"capacity at {sizes.prompt} prompt / {sizes.answer} answer tokens: "
              f"{capacity_rps(sizes):.3f} req/s (modelled)")
    print("\n".join(table(all_cases, args.seeds)))
    print(f"({args.seeds} seeds, {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
