"""JSONL sinks → telemetry.parquet: schema, crash leftovers, gap episodes, the loop."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.telemetry.fakes import wait_for
from zerohop.core.layout import TELEMETRY_DIR
from zerohop.core.records import ClockAnchor
from zerohop.telemetry.loop import run_sampler_loop
from zerohop.telemetry.realthreads import RealThread, StopSignal
from zerohop.telemetry.samples import GAP, GapTracker, Sample, TelemetryClock, labels_json
from zerohop.telemetry.store import (
    SampleSink,
    consolidate_telemetry,
    read_sample_rows,
)

pytestmark = pytest.mark.unit


def test_parquet_has_the_long_form_schema_sorted_by_time(tmp_path: Path) -> None:
    sink = SampleSink(tmp_path, "nvml")
    sink.add([
        Sample(2.0, "nvml", "gpu_temp_c", 41.0, labels_json({"gpu": 0}), "temperature"),
        Sample(1.0, "prom:h:1", "queue_depth", 3.0, labels_json({"model_name": "m"}), "x"),
    ])
    sink.close()
    out = consolidate_telemetry(tmp_path)
    assert out == tmp_path / "telemetry.parquet"
    table = pq.read_table(out)
    assert table.schema.names == ["ts", "source", "metric", "labels", "value", "raw_metric"]
    assert [str(t) for t in table.schema.types] == [
        "double", "string", "string", "string", "double", "string"]
    df = table.to_pandas()
    assert df["ts"].tolist() == [1.0, 2.0]
    assert json.loads(df["labels"][1]) == {"gpu": "0"}
    assert consolidate_telemetry(tmp_path) == out  # idempotent


def test_labels_are_canonical_json() -> None:
    assert labels_json({"b": 1, "a": "x"}) == '{"a":"x","b":"1"}'
    assert labels_json(None) == "{}"


def test_a_line_cut_by_a_kill_is_skipped_not_fatal(tmp_path: Path) -> None:
    sink = SampleSink(tmp_path, "prom")
    sink.add([Sample(1.0, "s", "m", 1.0)])
    sink.close()
    with open(sink.path, "a", encoding="utf-8") as fh:
        fh.write('[2.0,"s","m","{}",2.')  # the process died mid-write
    rows, bad = read_sample_rows(tmp_path)
    assert bad == 1 and len(rows) == 1
    assert pq.read_table(consolidate_telemetry(tmp_path)).num_rows == 1


def test_sink_flushes_within_a_second_without_close(tmp_path: Path) -> None:
    sink = SampleSink(tmp_path, "x")
    sink.add([Sample(1.0, "s", "m", 1.0)])
    assert sink.path.read_text() == ""  # buffered
    time.sleep(1.05)
    sink.add([Sample(2.0, "s", "m", 2.0)])
    assert len(sink.path.read_text().splitlines()) == 2
    sink.close()


def test_gap_episode_keeps_the_closing_row_or_the_open_one(tmp_path: Path) -> None:
    gaps = GapTracker("prom:h:1")
    sink = SampleSink(tmp_path, "prom")
    sink.add(gaps.missing(10.0, "connection refused"))
    sink.add(gaps.missing(11.0, "timeout after 2 s"))  # same episode: nothing new
    sink.add(gaps.present(13.5))
    sink.add(gaps.missing(20.0, "connection refused"))  # a second one, never closed (kill)
    sink.close()
    rows, _ = read_sample_rows(tmp_path)
    episodes = [(r[0], r[4], json.loads(r[3])["reason"]) for r in rows if r[2] == GAP]
    assert episodes[0] == (10.0, 3.5, "connection refused")
    assert episodes[1][0] == 20.0 and math.isnan(episodes[1][1])
    assert len(episodes) == 2


def test_no_telemetry_means_no_file(tmp_path: Path) -> None:
    assert consolidate_telemetry(tmp_path) is None
    (tmp_path / TELEMETRY_DIR).mkdir()
    assert consolidate_telemetry(tmp_path) is None


class _Flaky:
    """A sampler whose tick raises every other time."""

    name = "flaky"
    source = "flaky"
    interval_s = 0.01

    def __init__(self) -> None:
        self.ticks = 0

    def start(self, ts: float) -> list[Sample]:
        return []

    def tick(self, ts: float) -> list[Sample]:
        self.ticks += 1
        if self.ticks % 2 == 0:
            raise RuntimeError("boom")
        return [Sample(ts, "flaky", "x", float(self.ticks))]

    def close(self, ts: float) -> list[Sample]:
        return [Sample(ts, "flaky", "closed", 1.0)]


def test_loop_survives_a_failing_sampler_and_closes_cleanly(tmp_path: Path) -> None:
    sampler = _Flaky()
    stop = StopSignal()
    sink = SampleSink(tmp_path, sampler.name)
    clock = TelemetryClock(ClockAnchor.now())
    thread = RealThread(lambda: run_sampler_loop(sampler, sink, clock, stop), "t")
    thread.start()
    wait_for(lambda: sampler.ticks >= 4, "four ticks, failures among them")
    stop.set()
    assert thread.join(5.0)
    rows, _ = read_sample_rows(tmp_path)
    metrics = [r[2] for r in rows]
    assert sampler.ticks >= 4
    assert metrics.count("x") == (sampler.ticks + 1) // 2
    assert metrics[-1] == "closed"
    gaps = [json.loads(r[3]) for r in rows if r[2] == GAP]
    assert gaps and all(g["reason"] == "sampler error: RuntimeError: boom" for g in gaps)


class _Slow:
    """A sampler with a long interval (a 5 s scrape)."""

    name = "slow"
    source = "slow"
    interval_s = 5.0

    def start(self, ts: float) -> list[Sample]:
        return []

    def tick(self, ts: float) -> list[Sample]:
        return [Sample(ts, "slow", "x", 1.0)]

    def close(self, ts: float) -> list[Sample]:
        return []


def test_a_slow_sampler_still_reaches_the_disk_within_a_second(tmp_path: Path) -> None:
    stop = StopSignal()
    sink = SampleSink(tmp_path, "slow")
    thread = RealThread(
        lambda: run_sampler_loop(_Slow(), sink, TelemetryClock(ClockAnchor.now()), stop), "t")
    started = time.monotonic()
    thread.start()
    try:
        wait_for(lambda: sink.path.exists() and sink.path.read_text().count("\n") == 1,
                 "the first tick on disk", timeout_s=_Slow.interval_s)
        assert time.monotonic() - started < _Slow.interval_s  # long before the next tick
    finally:
        stop.set()
        assert thread.join(5.0)
