"""The files a client self-check reads and writes: the client's timing columns of a run,
the embedded target's ground truth, and the certificate (selfcheck.json), also kept in
a run's manifest as `client_certificate`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zerohop.core.layout import REQUESTS_FILE, SELFCHECK_FILE
from zerohop.storage.jsonl import without_nan
from zerohop.storage.run_folder import read_record_rows, update_manifest

if TYPE_CHECKING:  # pandas and pyarrow load only where a self-check reads (~0.5 s)
    import pandas as pd

CLIENT_TIMING_COLUMNS = (
    "request_id", "outcome", "sent_ts", "first_content_ts", "end_ts", "content_events",
    "itl_ms",
)


def read_client_timings(run_dir: Path) -> pd.DataFrame:
    """The columns of a run's records that the ground-truth join needs: from
    requests.parquet, or from the record sinks of a run that never consolidated."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from zerohop.analysis.run_data import ReportInputError

    path = Path(run_dir) / REQUESTS_FILE
    if path.is_file():
        try:
            return pq.read_table(path, columns=list(CLIENT_TIMING_COLUMNS)).to_pandas()
        except (OSError, KeyError, pa.ArrowException) as exc:
            raise ReportInputError(f"unreadable requests.parquet {path}: {exc}") from None
    rows, _bad = read_record_rows(Path(run_dir))
    return pd.DataFrame([{name: row.get(name) for name in CLIENT_TIMING_COLUMNS}
                         for row in rows], columns=list(CLIENT_TIMING_COLUMNS))


def read_ground_truth(path: Path) -> pd.DataFrame:
    """The target's ground-truth JSONL, one row per request (a torn line is skipped)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    if Path(path).is_file():
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(row, dict) and "request_id" in row:
                    rows.append(row)
    return pd.DataFrame(rows)


def write_certificate(folder: Path, document: dict[str, Any]) -> Path:
    """Atomic write of selfcheck.json (NaN written as null) into `folder`."""
    path = Path(folder) / SELFCHECK_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(without_nan(document), indent=2, sort_keys=True) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)
    return path


def attach_certificate(run_dir: Path, document: dict[str, Any]) -> None:
    """Copy a certificate into a run's folder and its manifest (`client_certificate`),
    where the report finds it."""
    write_certificate(run_dir, document)
    update_manifest(run_dir, client_certificate=without_nan(document))
