"""The results block (console, summary.json's `results`, results.csv) recomputed from
requests.parquet by a plain route of its own: sorted Python lists and the linear rule
between ranks, not numpy; the window from the records' own span."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tests.synthetic_runs import SyntheticRun, write_run
from zerohop.analysis.latency.results_table import ResultsTable, latency_stats, table_rows
from zerohop.core.percentile_choice import parse_percentiles
from zerohop.runner.results_block import results_block_lines
from zerohop.storage.run_reader import load_run
from zerohop.storage.summary_file import write_summary

pytestmark = pytest.mark.unit

TITLES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2e_ms": "E2E"}


def plain_percentile(values: list[float], q: float) -> float:
    ranked = sorted(values)
    position = (len(ranked) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ranked) - 1)
    return ranked[low] + (ranked[high] - ranked[low]) * (position - low)


def enough(n: int, q: float) -> bool:
    """The project's n rule said plainly: one observation beyond the percentile."""
    return n >= 2 and n * (1.0 - q / 100.0) >= 1.0 - 1e-9


def expected(run_dir: Path, percentiles: list[float]) -> dict[str, Any]:
    """Every figure of the block, from the parquet file's rows as plain Python."""
    rows = load_run(run_dir).requests.to_dict("records")
    import pyarrow.parquet as pq

    gaps_of = pq.read_table(run_dir / "requests.parquet", columns=["itl_ms"]).column(0).to_pylist()
    ok = [i for i, r in enumerate(rows) if r["outcome"] == "ok"]
    starts = [r["scheduled_ts"] if r["scheduled_ts"] == r["scheduled_ts"] else r["sent_ts"]
              for r in rows]
    start, end = min(starts), max(r["end_ts"] for r in rows)
    span = end - start
    ended_inside = [i for i in ok if start <= rows[i]["end_ts"] <= end]
    figures: dict[str, Any] = {
        "Successful requests": len(ok),
        "Failed requests": len(rows) - len(ok),
        "Benchmark duration": span,
        "Total input tokens": sum(int(rows[i]["input_tokens"]) for i in ok),
        "Total generated tokens": sum(int(rows[i]["output_tokens"]) for i in ok),
        "Request throughput": len(ended_inside) / span,
        "Output token throughput": sum(rows[i]["output_tokens"] for i in ended_inside) / span,
        "Total token throughput": sum(rows[i]["output_tokens"] + rows[i]["input_tokens"]
                                      for i in ended_inside) / span,
    }
    for metric, name in TITLES.items():
        if metric == "itl_ms":
            # between reads: a 0 ms gap is a token in its predecessor's read
            values = [g for i in ok for g in (gaps_of[i] or []) if math.isfinite(g) and g > 0]
        else:
            values = [rows[i][metric] for i in ok if math.isfinite(rows[i][metric])]
        figures[f"Mean {name}"] = sum(values) / len(values)
        figures[f"Median {name}"] = plain_percentile(values, 50.0)
        for q in (q for q in percentiles if q != 50.0):  # p50: the median's row
            figures[f"P{q:g} {name}"] = (plain_percentile(values, q)
                                         if enough(len(values), q) else None)
    return figures


def with_percentiles(run_dir: Path, text: str) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config"]["percentiles"] = text
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def csv_figures(run_dir: Path) -> dict[str, float | None]:
    with (run_dir / "results.csv").open() as handle:
        return {row["figure"]: float(row["value"]) if row["value"] else None
                for row in csv.DictReader(handle)}


@pytest.mark.parametrize(("n_requests", "asked"), [(600, "50,90,99"), (60, "25,99,99.9")])
def test_every_figure_is_the_records_own(tmp_path: Path, n_requests: int, asked: str) -> None:
    """600 requests: p99 printed (n ≥ 100); 60: p99 and p99.9 are "-", p25 is there."""
    run_dir = write_run(tmp_path, SyntheticRun(n_requests=n_requests, slo={},
                                              same_read_share=0.2))
    with_percentiles(run_dir, asked)
    doc = json.loads(write_summary(run_dir).read_text())["results"]
    percentiles = [float(q) for q in asked.split(",")]
    want = expected(run_dir, percentiles)
    got_csv = csv_figures(run_dir)
    assert list(got_csv) == list(want)  # same rows, same order (no SLO: no goodput row)
    for label, value in want.items():
        assert got_csv[label] == (None if value is None else pytest.approx(value)), label
    assert doc["percentiles"] == percentiles
    assert doc["successful_requests"] == want["Successful requests"]
    assert doc["request_rps"] == pytest.approx(want["Request throughput"])
    assert doc["total_tokens_per_s"] == pytest.approx(want["Total token throughput"])
    assert doc["goodput_rps"] is None
    for entry in doc["latency"]:
        name = TITLES[entry["metric"]]
        assert entry["mean"] == pytest.approx(want[f"Mean {name}"])
        assert entry["percentile_values"] == [
            None if want.get(f"P{q:g} {name}", 0) is None
            else pytest.approx(want.get(f"P{q:g} {name}", want[f"Median {name}"]))
            for q in percentiles]
    if n_requests < 100:
        assert want["P99 TTFT"] is None and want["P25 TTFT"] is not None


def test_a_judged_run_adds_its_goodput(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, SyntheticRun(n_requests=600, slo={"ttft_p99_ms": 400.0}))
    write_summary(run_dir)
    rows = load_run(run_dir).requests
    ok = rows[rows["outcome"] == "ok"]
    start = rows["scheduled_ts"].fillna(rows["sent_ts"]).min()
    span = rows["end_ts"].max() - start
    assert csv_figures(run_dir)["Request goodput"] == pytest.approx(
        (ok["ttft_ms"] <= 400.0).sum() / span)


def test_the_console_block_prints_each_row_and_a_dash_where_n_is_short() -> None:
    ttft = latency_stats("ttft_ms", np.arange(1.0, 51.0), (50.0, 99.0))
    table = ResultsTable(successful=50, failed=2, duration_s=10.0, input_tokens=5000,
                         output_tokens=1000, request_rps=5.0, output_tokens_per_s=100.0,
                         total_tokens_per_s=600.0, goodput_rps=None, latencies=(ttft,),
                         percentiles=(50.0, 99.0))
    lines = results_block_lines(table)
    assert "Successful requests:" in lines[1] and lines[1].endswith(" 50")
    assert any(line.startswith("Mean TTFT (ms):") and line.endswith(" 25.50") for line in lines)
    assert any(line.startswith("Median TTFT (ms):") and line.endswith(" 25.50") for line in lines)
    assert not any(line.startswith("P50 ") for line in lines)  # the median's row says it
    assert any(line.startswith("P99 TTFT (ms):") and line.endswith(" -") for line in lines)
    assert len(lines) == len(table_rows(table)) + 3  # title, one group heading, closing rule


@pytest.mark.parametrize("bad", ["0,50", "50,100", "p99", "50,,99"])
def test_a_bad_percentile_is_one_line_and_exit_2(bad: str) -> None:
    from zerohop.cli.main_job import run_command

    with pytest.raises(ValueError, match=r"^--percentiles: "):
        parse_percentiles(bad)
    result = CliRunner().invoke(run_command, ["--percentiles", bad, "--requests", "1"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--percentiles" in result.output
