from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.run_fixtures import RunFactory
from tests.synthetic_runs import SyntheticRun, manifest
from zerohop.analysis.itl_column import shadow
from zerohop.analysis.run_data import FLOAT_COLUMNS, ReportInputError, frame_from_rows
from zerohop.storage.run_folder import requests_schema
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit


def test_parquet_run_loads_every_analysis_column(make_run: RunFactory) -> None:
    run = load_run(make_run())
    assert run.requests_source == "parquet"
    assert len(run.requests) == 3000
    assert str(run.requests["workload"].dtype) == "category"
    assert run.itl.offsets.size == 3001
    # the ITL lists survive intact: request 0's gaps sum to its decode time
    ok = np.flatnonzero((run.requests["outcome"] == "ok").to_numpy())
    i = int(ok[0])
    gaps = run.itl.pooled(np.arange(len(run.requests)) == i)
    row = run.requests.iloc[i]
    assert gaps.sum() == pytest.approx(row["e2e_ms"] - row["ttft_ms"])
    assert {"ts", "source", "metric", "labels", "value"} <= set(run.telemetry.columns)
    assert run.microbench is not None and run.microbench["schema"] == "zerohop.microbench"


def test_unconsolidated_run_reads_jsonl_sinks_and_skips_a_torn_line(make_run: RunFactory) -> None:
    parquet = load_run(make_run(n_requests=400))
    sinks = load_run(make_run(n_requests=400, sinks_only=True))
    assert sinks.requests_source == "jsonl"
    assert len(sinks.requests) == len(parquet.requests)
    assert any("unreadable line" in note for note in sinks.notes)
    assert any("requests.parquet missing" in note for note in sinks.notes)
    np.testing.assert_array_equal(sinks.itl.pooled(every := np.ones(len(parquet.requests), bool)),
                                  parquet.itl.pooled(every))
    np.testing.assert_array_equal(sinks.itl.offsets, parquet.itl.offsets)
    np.testing.assert_allclose(
        sinks.requests["ttft_ms"].to_numpy(), parquet.requests["ttft_ms"].to_numpy()
    )


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="results folder not found"):
        load_run(tmp_path / "nope")


def test_no_records_at_all(make_run: RunFactory, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(make_run(n_requests=50), run_dir)
    (run_dir / "requests.parquet").unlink()
    with pytest.raises(ReportInputError, match=r"no requests\.parquet and no records"):
        load_run(run_dir)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "malformed manifest"),
        ("[1, 2]", "top level is not an object"),
        ('{"schema": "other"}', "schema is 'other'"),
        ('{"schema": "zerohop.run", "slo": [1]}', "field 'slo' should be dict"),
    ],
)
def test_malformed_manifest_names_the_problem(
    make_run: RunFactory, tmp_path: Path, text: str, message: str
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(make_run(n_requests=50), run_dir)
    (run_dir / "manifest.json").write_text(text)
    with pytest.raises(ReportInputError, match=message) as caught:
        load_run(run_dir)
    assert "\n" not in str(caught.value)


def test_missing_telemetry_and_bad_microbench_are_notes(
    make_run: RunFactory, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(make_run(n_requests=50), run_dir)
    (run_dir / "telemetry.parquet").unlink()
    (run_dir / "microbench.json").write_text(json.dumps({"schema": "something-else"}))
    run = load_run(run_dir)
    assert run.telemetry.empty
    assert run.microbench is None
    assert any("no telemetry.parquet" in n for n in run.notes)
    assert any("microbench.json" in n for n in run.notes)


def test_parquet_in_row_groups_reads_as_the_same_records_do_in_memory(tmp_path: Path) -> None:
    """Row groups, empty and null ITL lists, a NaN gap, all-null and integer columns:
    the column-at-a-time reader gives what `frame_from_rows` gives for the records."""
    rng = np.random.default_rng(4)
    rows = []
    for i in range(40):
        gaps: list[float] | None = [float(v) for v in rng.exponential(10.0, i % 5)]
        if i == 7:
            gaps = None
        elif i == 9:
            gaps = [1.0, float("nan"), 0.0]
        rows.append(
            {
                "request_id": f"r{i}",
                "workload": ["chat", "rag"][i % 2],
                "outcome": "ok" if i % 6 else "http_503",
                "sent_ts": 1000.0 + i,
                "ttft_ms": None if i % 6 == 0 else float(rng.exponential(50.0)),
                "input_tokens": None if i == 3 else int(rng.integers(1, 900)),
                "error_message": None if i % 6 else "HTTP 503",
                "itl_ms": gaps,
            }
        )
    table = pa.Table.from_pylist(rows, schema=requests_schema())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    pq.write_table(table, run_dir / "requests.parquet", row_group_size=6)
    (run_dir / "manifest.json").write_text(json.dumps(manifest(SyntheticRun())))
    run = load_run(run_dir)
    frame, itl = frame_from_rows(rows)
    np.testing.assert_array_equal(run.itl.offsets, itl.offsets)
    # held as float32 shadows, the exact gaps read again from the file (row groups
    # of 6 requests, blocks of 4: a block spans batches, a batch spans blocks)
    np.testing.assert_array_equal(run.itl.values, shadow(itl.values))
    every = np.ones(len(rows), dtype=bool)
    np.testing.assert_array_equal(run.itl.pooled(every), itl.values)
    exact = [values for _first, values in run.itl.exact_blocks(4)]
    np.testing.assert_array_equal(np.concatenate(exact), itl.values)
    np.testing.assert_array_equal(run.itl.row_max(), itl.row_max())
    # `exact_itl` (zerohop compare): the same gaps held as float64, nothing to read again
    exact_run = load_run(run_dir, exact_itl=True)
    assert exact_run.itl.exact_source is None and exact_run.itl.values.dtype == np.float64
    np.testing.assert_array_equal(exact_run.itl.values, itl.values)
    np.testing.assert_array_equal(exact_run.itl.offsets, itl.offsets)
    for name in FLOAT_COLUMNS:
        np.testing.assert_array_equal(
            run.requests[name].to_numpy(dtype=float), frame[name].to_numpy(dtype=float)
        )
    for name in ("workload", "outcome", "adapter", "error_message"):
        assert run.requests[name].isna().tolist() == frame[name].isna().tolist()
        assert run.requests[name].dropna().astype(str).tolist() == (
            frame[name].dropna().astype(str).tolist()
        )
