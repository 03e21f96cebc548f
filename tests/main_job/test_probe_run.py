"""`zerohop run --probe-rate 5` against the embedded target: the probe's short requests
are measured alone first, then beside the load, and kept out of the workloads' records.
Under a load that queues (two sequences at a time, slowed decode, arrivals well over
what it serves) the probe's TTFT under load is measurably above its idle baseline; under
a light load the difference stays within the idle probes' own spread. Both are judged
against what the same run measured idle, never against a fixed time."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.main_job.test_run_command import zerohop
from tests.main_job.test_run_limits import only_run
from zerohop.analysis.comparison.probe import summarise_probe
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.integration  # runs `zerohop run` as a child process

PROBE = ("--probe-rate", "5", "--probe-idle", "4s", "--only", "ShortQueryFlood",
         "--duration", "8s", "--telemetry", "loadgen")


def _probe_run(tmp_path: Path, *args: str) -> tuple[Path, str]:
    res = zerohop("run", *PROBE, *args, "--results-dir", str(tmp_path))
    assert res.returncode in (0, 1), res.stderr[-3000:]  # 1: a workload SLO missed
    run = only_run(tmp_path)
    # the probe's records are apart: not one in the workloads' records
    records = pd.read_parquet(run / "requests.parquet")
    assert "probe" not in set(records["workload"])
    probe_rows = [json.loads(line) for line in (run / "probe" / "probe.jsonl").read_text()
                  .splitlines()]
    assert probe_rows and {row["workload"] for row in probe_rows} == {"probe"}
    phases = json.loads((run / "probe" / "phases.json").read_text())
    # the load began after the idle phase, and the workloads' first send after that
    assert phases["load_start_ts"] - phases["idle_start_ts"] == pytest.approx(4.0, abs=0.5)
    assert records["sent_ts"].min() >= phases["load_start_ts"]
    return run, res.stdout


@pytest.mark.slow
@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_a_load_that_queues_delays_the_probe(tmp_path: Path) -> None:
    run, stdout = _probe_run(tmp_path, "--rate", "20", "--no-report",
                             "--sim-args", "--max-num-seqs 2 --time-scale 2")
    figures = summarise_probe(load_run(run))
    assert figures is not None
    [arm] = figures.arms
    ttft = arm.shift("ttft_ms", "p50")
    assert ttft.too_few is None, ttft.too_few
    assert ttft.ci_low_ms > 0  # measurably above its idle baseline
    # and not by a little: the median under load is above every idle probe's TTFT
    probe = load_run(run).probe
    assert probe is not None
    idle_max = probe.requests.loc[probe.requests["end_ts"] <= probe.phases["load_start_ts"],
                                  "ttft_ms"].max()
    assert ttft.load_ms > idle_max
    assert "probe: the load added to a short request's TTFT p50 +" in stdout


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_a_light_load_leaves_the_probe_as_it_was_idle(tmp_path: Path) -> None:
    run, stdout = _probe_run(tmp_path, "--rate", "0.5")
    figures = summarise_probe(load_run(run))
    assert figures is not None
    [arm] = figures.arms
    ttft = arm.shift("ttft_ms", "p50")
    assert ttft.too_few is None, ttft.too_few
    # Not "the interval holds 0": a 95 % interval misses a true 0 one run in twenty, and
    # the idle phase is the engine's first seconds, so the probe often answers a little
    # faster under a light load than idle (CI runs: idle 8.05 ms, under load 7.99; idle
    # 7.71, under load 7.50 with the idle middle half 0.20 wide). What the probe claims
    # is interference, the latency a load adds: the light load adds less than the idle
    # probes' own middle half spans, or 2 % of the idle median (a quiet engine's spread
    # can be 0.07 ms, under a 2-core VM's scheduling jitter). A load that interferes adds
    # milliseconds (the queueing test above). Faster under load is bounded too, at 5 %
    # of the idle median: more than warm-up explains would be a measuring fault.
    probe = load_run(run).probe
    assert probe is not None
    idle = probe.requests.loc[probe.requests["end_ts"] <= probe.phases["load_start_ts"],
                              "ttft_ms"]
    spread = float(idle.quantile(0.75) - idle.quantile(0.25))
    added_bound = max(spread, 0.02 * float(idle.median()))
    faster_bound = max(spread, 0.05 * float(idle.median()))
    assert -faster_bound <= ttft.delta_ms <= added_bound, (
        ttft.delta_ms, spread, added_bound, faster_bound, ttft.ci_low_ms, ttft.ci_high_ms)
    # p99 needs 100 samples a phase: a few seconds of probe say so instead of a number
    assert arm.shift("ttft_ms", "p99").too_few is not None
    assert "probe: the load added to a short request's TTFT p50" in stdout
    # the report's section: the console's line, the table, the chart on the run's clock
    html = (run / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="probe">'):]
    section = section[:section.index("</section>")]
    assert "Interference probe" in section and "TTFT p50" in section and "E2E p99" in section
    assert 'href="#probe">Interference probe</a>' in html
    _summary_holds_the_probe(run)


def _summary_holds_the_probe(run: Path) -> None:
    """summary.json's `probe`, recounted from the probe's own files: idle = answered
    before the load began, under load = sent while it ran; p50 the inverted-CDF median
    of each phase's ok TTFTs; p99 null below 100 samples a phase."""
    doc = json.loads((run / "summary.json").read_text())["probe"]
    from tests.storage.test_summary_file import documented, key_paths

    assert {f"probe.{k}" for k in key_paths(doc)} == documented("The probe block")
    phases = json.loads((run / "probe" / "phases.json").read_text())
    rows = [json.loads(line) for line in (run / "probe" / "probe.jsonl").read_text()
            .splitlines()]
    ok = [r for r in rows if r["outcome"] == "ok"]
    idle = sorted(r["ttft_ms"] for r in ok if r["end_ts"] <= phases["load_start_ts"])
    load = sorted(r["ttft_ms"] for r in ok
                  if phases["load_start_ts"] <= r["sent_ts"] < phases["load_end_ts"])
    assert doc["rate_rps"] == pytest.approx(5.0) and doc["idle_s"] == pytest.approx(4.0)
    [arm] = doc["arms"]
    assert (arm["idle_n"], arm["load_n"]) == (len(idle), len(load))
    shifts = {(s["metric"], s["stat"]): s for s in arm["shifts"]}
    median = shifts[("ttft_ms", "p50")]

    def lower_median(values: list[float]) -> float:  # inverted CDF: the ceil(n/2)-th
        return values[(len(values) + 1) // 2 - 1]

    assert median["idle_ms"] == pytest.approx(lower_median(idle))
    assert median["load_ms"] == pytest.approx(lower_median(load))
    assert median["delta_ms"] == pytest.approx(median["load_ms"] - median["idle_ms"])
    low, high = median["ci95_ms"]
    assert low <= high
    p99 = shifts[("ttft_ms", "p99")]
    assert p99["load_ms"] is None and "too few samples" in p99["too_few"]


@pytest.mark.slow
@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_in_distributed_mode_the_master_sends_the_probe_and_the_workers_wait(
        tmp_path: Path) -> None:
    run, stdout = _probe_run(tmp_path, "--rate", "2", "--workers", "2", "--no-report")
    records = pd.read_parquet(run / "requests.parquet")
    rows = [json.loads(line) for line in (run / "probe" / "probe.jsonl").read_text()
            .splitlines()]
    # one process sent every probe request, and it is none of the load's workers
    probe_workers = {row["worker"] for row in rows}
    assert len(probe_workers) == 1
    assert probe_workers.isdisjoint(set(records["worker"].astype(str)))
    assert records["worker"].nunique() == 2
    figures = summarise_probe(load_run(run))
    assert figures is not None and figures.arms[0].idle_n > 0 and figures.arms[0].load_n > 0
    assert "probe: the load added to a short request's TTFT p50" in stdout
