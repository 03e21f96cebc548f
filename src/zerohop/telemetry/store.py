"""Crash-safe telemetry storage: JSONL sinks while running, one parquet file at the end.

Each sampler thread (and each process) appends to its own file under
`<run>/telemetry/`, flushed at least once a second, so a kill -9 loses at most a second
and no two writers share a file or a lock. `consolidate_telemetry` (called by
`TelemetryRecorder.stop`, or by `zerohop consolidate` after a crash) turns all of them
into `<run>/telemetry.parquet`, long form, sorted by time.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zerohop.core.layout import TELEMETRY_DIR, TELEMETRY_FILE
from zerohop.storage.jsonl import JsonlAppender, read_jsonl_folder
from zerohop.telemetry.samples import GAP, Sample

COLUMNS = ("ts", "source", "metric", "labels", "value", "raw_metric")
FLUSH_INTERVAL_S = 1.0


def telemetry_schema() -> pa.Schema:
    return pa.schema([
        pa.field("ts", pa.float64()),
        pa.field("source", pa.string()),
        pa.field("metric", pa.string()),
        pa.field("labels", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("raw_metric", pa.string()),
    ])


class SampleSink:
    """Append-only JSONL of samples (one JSON array per line, in COLUMNS order) for one
    writer. Not thread-safe by design: one sink per thread."""

    def __init__(self, run_dir: Path, tag: str) -> None:
        self._out = JsonlAppender(run_dir / TELEMETRY_DIR, f"{tag}-{os.getpid()}")
        self.path = self._out.path
        self._oldest: float | None = None

    @property
    def rows_written(self) -> int:
        return self._out.rows_written

    def add(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            self._out.append(json.dumps(s.to_list(), separators=(",", ":")))
        if self._out.pending and self._oldest is None:
            self._oldest = time.monotonic()
        self.flush_if_due()

    def flush_if_due(self) -> None:
        if self._oldest is not None and time.monotonic() - self._oldest >= FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        self._oldest = None
        self._out.flush()

    def close(self) -> None:
        self._out.close()


def read_sample_rows(run_dir: Path) -> tuple[list[list[Any]], int]:
    """Every row of every sink, and the number of unreadable lines (a line cut short by
    a kill is expected). Gap episodes are collapsed: when a gap's closing row (its
    duration) exists, the opening row (NaN) is dropped."""
    values, bad = read_jsonl_folder(run_dir / TELEMETRY_DIR)
    rows = [row for row in values if _valid(row)]
    return _collapse_gaps(rows), bad + len(values) - len(rows)


def consolidate_telemetry(run_dir: Path) -> Path | None:
    """Write `<run_dir>/telemetry.parquet` from the sinks (idempotent). None when the
    run recorded no telemetry at all."""
    folder = run_dir / TELEMETRY_DIR
    if not folder.is_dir() or not any(folder.glob("*.jsonl")):
        return None
    rows, _bad = read_sample_rows(run_dir)
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    columns = {name: [r[i] for r in rows] for i, name in enumerate(COLUMNS)}
    columns["ts"] = [float(v) for v in columns["ts"]]
    columns["value"] = [math.nan if v is None else float(v) for v in columns["value"]]
    table = pa.table(columns, schema=telemetry_schema())
    out = run_dir / TELEMETRY_FILE
    tmp = run_dir / (TELEMETRY_FILE + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, out)
    return out


def _valid(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == len(COLUMNS)
        and isinstance(row[0], int | float)
        and isinstance(row[1], str)
        and isinstance(row[2], str)
        and isinstance(row[3], str)
        and (row[4] is None or isinstance(row[4], int | float))
        and (row[5] is None or isinstance(row[5], str))
    )


def _collapse_gaps(rows: list[list[Any]]) -> list[list[Any]]:
    closed = {
        (r[0], r[1], r[3]) for r in rows
        if r[2] == GAP and r[4] is not None and not math.isnan(r[4])
    }
    out = []
    for r in rows:
        if r[2] == GAP and (r[4] is None or math.isnan(r[4])) and (r[0], r[1], r[3]) in closed:
            continue
        out.append(r)
    return out
