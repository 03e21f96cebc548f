"""Writers for the synthetic results folders (`tests/synthetic_runs.py` makes the
columns): requests.parquet in row groups, or the JSONL sinks of a killed run."""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zerohop.core.records import RECORD_FIELDS
from zerohop.storage.run_folder import requests_schema


class RequestsWriter:
    """requests.parquet written one row group per `write` (zstd, as `consolidate`
    writes it), so a run of any size is generated a slice at a time."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._writer: pq.ParquetWriter | None = None

    def write(self, columns: dict[str, Any], offsets: np.ndarray, itl: np.ndarray) -> None:
        table = requests_table(columns, offsets, itl)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._path, table.schema, compression="zstd")
        self._writer.write_table(table, row_group_size=table.num_rows)

    def __enter__(self) -> RequestsWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._writer is not None:
            self._writer.close()


def requests_table(columns: dict[str, Any], offsets: np.ndarray, itl: np.ndarray) -> pa.Table:
    """Every RECORD_FIELDS column, typed as `consolidate` types them; the list columns
    from offsets + flat values."""
    schema = requests_schema()
    arrays: dict[str, pa.Array] = {}
    n = len(offsets) - 1
    list_offsets = pa.array(offsets.astype(np.int32))
    for name in RECORD_FIELDS:
        if name == "itl_ms":
            arrays[name] = pa.ListArray.from_arrays(list_offsets, pa.array(itl))
        elif name == "tokens_per_event":
            ones = pa.array(np.ones(itl.size, dtype=np.int64))
            arrays[name] = pa.ListArray.from_arrays(list_offsets, ones)
        else:
            arrays[name] = _arrow_column(columns[name], schema.field(name).type)
    assert all(len(a) == n for a in arrays.values())
    return pa.table(arrays, schema=schema)


def _arrow_column(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    if values.dtype.kind == "f" and pa.types.is_integer(typ):
        return pa.array(values, pa.float64(), from_pandas=True).cast(typ)
    return pa.array(values, typ, from_pandas=True)


def write_jsonl(
    run_dir: Path, columns: dict[str, Any], offsets: np.ndarray, itl: np.ndarray
) -> None:
    sinks = run_dir / "records"
    sinks.mkdir(exist_ok=True)
    n = len(offsets) - 1
    lines = []
    for i in range(n):
        row = {}
        for name in RECORD_FIELDS:
            if name == "itl_ms":
                row[name] = itl[offsets[i] : offsets[i + 1]].tolist()
            elif name == "tokens_per_event":
                row[name] = [1] * int(offsets[i + 1] - offsets[i])
            else:
                value = columns[name][i]
                if isinstance(value, np.generic):
                    value = value.item()
                if isinstance(value, float) and value != value:
                    value = None
                row[name] = value
        lines.append(json.dumps(row))
    half = n // 2
    (sinks / "host-1.jsonl").write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    # the second sink was killed mid-write: a torn last line
    (sinks / "host-2.jsonl").write_text(
        "\n".join(lines[half:]) + '\n{"request_id": "torn', encoding="utf-8"
    )
