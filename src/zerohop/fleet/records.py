"""requests.parquet written in batches as the simulation goes, in the schema
`zerohop consolidate` writes, so a simulated hour never holds every row at once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zerohop.core.layout import REQUESTS_FILE
from zerohop.storage.run_folder import requests_schema

BATCH_ROWS = 50_000


class RecordWriter:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / REQUESTS_FILE
        self._tmp = run_dir / (REQUESTS_FILE + ".tmp")
        self._schema = requests_schema()
        self._writer = pq.ParquetWriter(self._tmp, self._schema, compression="zstd")
        self._rows: list[dict[str, Any]] = []
        self.rows_written = 0

    def add(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= BATCH_ROWS:
            self._flush()

    def close(self) -> None:
        self._flush()
        self._writer.close()
        os.replace(self._tmp, self.path)

    def _flush(self) -> None:
        if not self._rows:
            return
        self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self._schema))
        self.rows_written += len(self._rows)
        self._rows = []
