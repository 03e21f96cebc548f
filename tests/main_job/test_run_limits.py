"""`zerohop run --requests N` stops after N requests and divides its rates by the time it
really measured; `--max-concurrency N` beside `--rate` holds N in flight, the arrivals
that found none free wait and their records keep the wait."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.main_job.test_run_command import zerohop

pytestmark = pytest.mark.integration  # runs `zerohop run` as a child process


def only_run(root: Path) -> Path:
    [run] = list(root.iterdir())
    return run


def max_in_flight(records: pd.DataFrame) -> int:
    """The most requests between their send and their end at any moment (an end and a
    send at the same instant: the end first)."""
    events = sorted([(t, 1) for t in records["sent_ts"]] + [(t, -1) for t in records["end_ts"]])
    level = peak = 0
    for _ts, step in events:
        level += step
        peak = max(peak, level)
    return peak


def test_requests_with_a_concurrency_cap(tmp_path: Path) -> None:
    res = zerohop("run", "--requests", "40", "--rate", "40", "--max-concurrency", "2",
                  "--only", "ShortQueryFlood", "--telemetry", "none", "--no-report",
                  "--results-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    run = only_run(tmp_path)
    records = pd.read_parquet(run / "requests.parquet")
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(records) == 40 and (records["outcome"] == "ok").all()
    assert manifest["status"] == "completed" and manifest["load"]["requests"] == 40
    assert manifest["counters"]["dropped_arrivals"] == 0  # they waited instead

    assert max_in_flight(records) <= 2
    waits = records["queue_wait_ms"]
    assert waits.notna().all() and (waits >= 0).all()
    assert (waits > 0).sum() > len(records) / 2  # 40 req/s into 2 slots: most queue
    # the latencies from schedule include the wait; the schedule lag does not
    parts = records["ttft_ms"] + waits + records["schedule_lag_ms"]
    assert (records["ttft_from_schedule_ms"] - parts).abs().max() < 1e-6

    summary = json.loads((run / "summary.json").read_text())
    arrival = records["scheduled_ts"].fillna(records["sent_ts"])
    span = records["end_ts"].max() - arrival.min()
    assert summary["window"]["source"] == "records"
    assert summary["window"]["duration_s"] == pytest.approx(span)
    [flood] = summary["workloads"]
    assert flood["rates"]["req_per_s"] == pytest.approx(40 / span)
    assert flood["metrics"]["queue_wait_ms"]["n"] == 40
    assert summary["run"]["load"]["max_concurrency"] == 2


def test_requests_in_a_closed_loop(tmp_path: Path) -> None:
    wl = tmp_path / "closed.yaml"
    wl.write_text("kind: short_query_flood\nname: closed\ninput_tokens: 32\nmax_tokens: 8\n"
                  "load: {kind: closed, users: 3}\n")
    res = zerohop("run", "--requests", "25", "--workload", str(wl), "--telemetry", "none",
                  "--no-report", "--results-dir", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-3000:]
    run = only_run(tmp_path / "r")
    records = pd.read_parquet(run / "requests.parquet")
    assert len(records) == 25 and (records["outcome"] == "ok").all()
    assert records["queue_wait_ms"].isna().all() and records["scheduled_ts"].isna().all()
    summary = json.loads((run / "summary.json").read_text())
    span = records["end_ts"].max() - records["sent_ts"].min()
    assert summary["total"]["rates"]["req_per_s"] == pytest.approx(25 / span)
    assert summary["run"]["status"] == "completed"


def test_requests_beyond_a_finite_schedule_end_with_it(tmp_path: Path) -> None:
    """A trace shorter than --requests: the run ends when its schedule has, not at the
    duration cap (a day, with --requests alone)."""
    shipped = Path(__file__).resolve().parents[2] / "workloads" / "trace_replay_azure_conv.yaml"
    text = shipped.read_text().replace("duration_s: 60", "duration_s: 2", 1)
    assert "duration_s: 2" in text
    wl = tmp_path / "short_trace.yaml"
    wl.write_text(text)
    res = zerohop("run", "--workload", str(wl), "--requests", "100000", "--telemetry", "none",
                  "--no-report", "--results-dir", str(tmp_path / "r"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    run = only_run(tmp_path / "r")
    records = pd.read_parquet(run / "requests.parquet")
    assert 0 < len(records) < 100000
    assert json.loads((run / "manifest.json").read_text())["status"] == "completed"


def test_a_timed_run_counts_the_arrivals_its_cap_held_until_the_end(tmp_path: Path) -> None:
    """`--rate 40 --max-concurrency 1` for 6 s: the target serves a few a second, the
    rest of the schedule waits for the one slot. Every arrival due in the window is
    offered, sent or not: those still waiting at the end are kept apart (not_sent/),
    counted by the offered rate and by no other figure."""
    res = zerohop("run", "--rate", "40", "--max-concurrency", "1", "--duration", "6s",
                  "--only", "ShortQueryFlood", "--telemetry", "none", "--no-report",
                  "--results-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    run = only_run(tmp_path)
    records = pd.read_parquet(run / "requests.parquet")
    held = pd.DataFrame([json.loads(line) for path in (run / "not_sent").glob("*.jsonl")
                         for line in path.read_text().splitlines()])
    summary = json.loads((run / "summary.json").read_text())
    assert (records["outcome"] == "ok").all()  # what was sent; the held are no error
    assert len(held) > len(records)  # 40 req/s into one slot: most never left
    assert (held["outcome"] == "not_sent").all() and held["sent_ts"].isna().all()
    assert summary["run"]["load"]["not_sent"] == len(held)

    start, end = summary["window"]["start_ts"], summary["window"]["end_ts"]
    due = pd.concat([records["scheduled_ts"], held["scheduled_ts"]])
    in_window = int(((due >= start) & (due < end)).sum())
    [flood] = summary["workloads"]
    offered = flood["rates"]["offered_rps"]
    assert offered == pytest.approx(in_window / (end - start))
    assert abs(in_window - 40 * (end - start)) <= 4 * (40 * (end - start)) ** 0.5  # Poisson
    assert flood["rates"]["req_per_s"] < offered / 2
    assert flood["requests"] == len(records) and flood["errors"] == 0
    assert "cap held back" in res.stdout + res.stderr
