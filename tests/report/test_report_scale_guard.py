"""The report's cost at a million records stays a bounded multiple of reading its data.

`tests/bench/bench_report_scale.py` states the limits of a nightly hour (ten million
records: 30 s, 4 GB); a script nobody runs let them break unseen (issue 42). This
test runs the bench's own run at 1M records (~31M ITL gaps, an hour of 8-GPU
telemetry) and judges the CPU seconds of `build_report` against a floor measured in
the same process: the CPU seconds pyarrow takes to read the same Parquet columns.
CPU time, not wall time, and a ratio, not seconds: a neighbour that takes the cores
slows both sides alike, and a slower machine too. What it catches is a change of
kind: a Python loop over the records, a column read twice, a copy of the gaps.

Measured (2-core AMD EPYC, busy with other jobs; docs/report-scale.md): 10.0–10.6
before issue 42's fixes, 3.7–5.6 after; the old PD split's Python loop over every ok
record planted back lifts it to 6.5–7.5 and fails it. A busy neighbour inflates the
floor (pyarrow's decode) at least as much as the report, so it loosens the test
rather than failing it: not `alone`.

`zerohop compare` of two such runs is judged against the report of one, both timed in
this process: its CPU within 2x the report's (issue 42's goal is 1.5x at ten million
records; at one million these runs measure 1.16–1.23x in process; the compare that
pooled and sorted every run's gaps measured 2.3x here and fails it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.bench.bench_report_scale import floor_cpu_seconds, generate_run
from zerohop.report import build_report
from zerohop.report.build import build_comparison

pytestmark = pytest.mark.slow  # ~35 s: 2 runs of 1M written, a report, a compare, 2 floors

RECORDS = 1_000_000
RATIO_LIMIT = 6.0  # report CPU ÷ floor CPU: 3.7–5.6 measured after issue 42, ~10 before
COMPARE_LIMIT = 2.0  # compare CPU ÷ report CPU: 1.16–1.23 after issue 42, 2.3 before


def test_a_million_record_report_and_compare_cost_bounded_multiples(tmp_path: Path) -> None:
    run_dir = generate_run(tmp_path / "a", RECORDS)
    other = generate_run(tmp_path / "b", RECORDS, noise_seed=2)
    floor_before = floor_cpu_seconds(run_dir)  # also warms the page cache for the report
    report_cpu = _cpu_seconds(lambda: build_report(run_dir, out=tmp_path / "report.html"))
    floor = min(floor_before, floor_cpu_seconds(run_dir))
    ratio = report_cpu / floor
    assert ratio < RATIO_LIMIT, (
        f"build_report of {RECORDS:,} records took {report_cpu:.1f} s CPU, {ratio:.1f}x "
        f"the {floor:.2f} s pyarrow takes to read its columns (limit {RATIO_LIMIT:g}x): "
        "profile tests/bench/bench_report_scale.py --records 1000000"
    )
    floor_cpu_seconds(other, repeat=1)  # the other run's pages cached too
    compare_cpu = _cpu_seconds(
        lambda: build_comparison([run_dir, other], tmp_path / "compare.html"))
    assert compare_cpu / report_cpu < COMPARE_LIMIT, (
        f"zerohop compare of two {RECORDS:,}-record runs took {compare_cpu:.1f} s CPU, "
        f"{compare_cpu / report_cpu:.1f}x the {report_cpu:.1f} s of one report (limit "
        f"{COMPARE_LIMIT:g}x): tests/bench/bench_report_scale.py --compare-with OTHER"
    )


def _cpu_seconds(job: Callable[[], object]) -> float:
    started = time.process_time()
    job()
    return time.process_time() - started
