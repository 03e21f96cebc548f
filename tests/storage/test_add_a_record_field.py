"""The walkthrough of docs/architecture.md, "A new metric": a field declared on the
record with its schema entry is all the results folder and the analysis need. A toy
record with two new fields is put where `RequestRecord` is; the sink, consolidation and
`load_run` then carry them, typed by their entries, with no other edit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zerohop.analysis import run_data
from zerohop.core import records
from zerohop.core.layout import REQUESTS_FILE
from zerohop.core.records import CATEGORY, NUMBER, TEXT, RequestRecord, column, record_columns
from zerohop.storage import run_folder as results
from zerohop.storage import run_reader
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit


@dataclass
class WithGpuEnergy(RequestRecord):
    """A new metric and a new grouping key: each one field with its entry."""

    gpu_joules: float | None = column("energy the GPU spent on the request", unit="J",
                                      read=NUMBER)
    gpu_name: str | None = column("the GPU that served it", read=CATEGORY)


@pytest.fixture
def record_with_new_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each module as its import would leave it with `WithGpuEnergy` as the record: the
    schema derived again from the record (`record_columns`), the analysis' lists from it
    (`run_data.read_as`), every other module unchanged."""
    assert "gpu_joules" not in records.RECORD_FIELDS  # the fields are new
    columns = record_columns(WithGpuEnergy)
    monkeypatch.setattr(records, "RECORD_COLUMNS", columns)
    monkeypatch.setattr(records, "RECORD_FIELDS", tuple(c.name for c in columns))
    lists = {
        "CATEGORY_COLUMNS": run_data.read_as(CATEGORY, columns),
        "FLOAT_COLUMNS": run_data.read_as(NUMBER, columns),
        "TEXT_COLUMNS": run_data.read_as(TEXT, columns),
    }
    lists["REQUEST_COLUMNS"] = (
        lists["CATEGORY_COLUMNS"] + lists["FLOAT_COLUMNS"] + lists["TEXT_COLUMNS"]
    )
    for module in (run_data, run_reader):
        for name, value in lists.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)


def _run_with_records(tmp_path: Path) -> Path:
    run = results.new_run_dir(tmp_path, "energy")
    results.start_manifest(run, name="energy")
    sink = results.RecordSink(run, "p1")
    for i in range(3):
        sink.add(WithGpuEnergy(
            request_id=f"r{i}", workload="w", api="openai-chat", model="m", outcome="ok",
            sent_ts=1000.0 + i, ttft_ms=10.0 + i, gpu_joules=1.5 * i,
            gpu_name="h200" if i else None,
        ).to_row())
    sink.close()
    return run


@pytest.mark.usefixtures("record_with_new_fields")
def test_a_field_with_its_entry_reaches_the_sink_the_parquet_file_and_the_analysis(
    tmp_path: Path,
) -> None:
    run = _run_with_records(tmp_path)

    unconsolidated = load_run(run)  # read from the JSONL sinks
    assert unconsolidated.requests_source == "jsonl"
    assert unconsolidated.requests["gpu_joules"].tolist() == [0.0, 1.5, 3.0]

    results.consolidate(run)
    schema = pq.read_schema(run / REQUESTS_FILE)
    assert schema.field("gpu_joules").type == pa.float64()
    assert schema.field("gpu_name").type == pa.string()

    loaded = load_run(run)
    assert loaded.requests_source == "parquet"
    frame = loaded.requests
    assert frame["gpu_joules"].dtype == np.float64
    assert frame["gpu_joules"].tolist() == [0.0, 1.5, 3.0]
    assert frame["gpu_name"].dtype == "category"
    assert frame["gpu_name"].astype(object).tolist()[1:] == ["h200", "h200"]
    assert frame["ttft_ms"].tolist() == [10.0, 11.0, 12.0]  # the old fields as they were
