"""The results folder: manifest, crash-safe record sinks, consolidation to parquet.

Layout: `results/<UTC yyyymmdd-HHMMSS>-<name>/` holding `manifest.json`,
`records/<process>.jsonl` (append-only, flushed at least once a second while running),
and `requests.parquet` written at the end. A run killed with -9 keeps every flushed line;
`zerohop consolidate RUN_DIR` turns them into the parquet file afterwards.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import socket
import sys
import time
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zerohop.core import json_codec, records
from zerohop.core.layout import MANIFEST_FILE, RECORDS_DIR, REQUESTS_FILE
from zerohop.core.redaction import known_secrets, redact, scrub
from zerohop.storage.jsonl import JsonlAppender, read_jsonl_folder

if TYPE_CHECKING:  # pyarrow loads where Parquet is written: not in a Locust worker
    import pyarrow as pa

FLUSH_INTERVAL_S = 0.5


# --- run folders ----------------------------------------------------------------------
def new_run_dir(root: Path, name: str, *, now: dt.datetime | None = None) -> Path:
    """Create `root/<UTC stamp>-<name>`; a clash (same second) gets a numeric suffix."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d-%H%M%S")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    root.mkdir(parents=True, exist_ok=True)
    for i in range(1000):
        candidate = root / (f"{stamp}-{slug}" + (f"-{i}" if i else ""))
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        (candidate / RECORDS_DIR).mkdir()
        return candidate
    raise RuntimeError(f"could not create a run folder under {root}")


# --- manifest -------------------------------------------------------------------------
def utc_now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def environment_info() -> dict[str, Any]:
    versions = {"zerohop": _version("zerohop"), "python": platform.python_version()}
    for pkg in ("locust", "gevent", "numpy", "pandas", "pyarrow", "cupy", "nvidia-ml-py"):
        v = _version(pkg)
        if v:
            versions[pkg] = v
    host = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python_executable": sys.executable,
    }
    return {"versions": versions, "host": host}


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def write_manifest(run_dir: Path, manifest: Mapping[str, Any]) -> None:
    """Atomic write (temp file + rename) of a redacted manifest: a reader never sees half."""
    data = redact(dict(manifest), known_secrets())
    tmp = run_dir / (MANIFEST_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, run_dir / MANIFEST_FILE)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST_FILE
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"malformed manifest {path}: top level is not an object")
    return data


def update_manifest(run_dir: Path, **fields: Any) -> dict[str, Any]:
    manifest = read_manifest(run_dir)
    manifest.update(fields)
    write_manifest(run_dir, manifest)
    return manifest


def start_manifest(run_dir: Path, *, name: str, **fields: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "schema": "zerohop.run",
        "schema_version": 1,
        "run_id": run_dir.name,
        "name": name,
        "status": "running",
        "end_reason": None,
        "started_at": utc_now_iso(),
        "ended_at": None,
        "pid": os.getpid(),
        **environment_info(),
        **fields,
    }
    write_manifest(run_dir, manifest)
    return manifest


def finish_manifest(run_dir: Path, *, status: str, end_reason: str, **fields: Any) -> None:
    manifest = read_manifest(run_dir)
    started = manifest.get("started_at")
    ended = utc_now_iso()
    duration = None
    if isinstance(started, str):
        t0 = dt.datetime.fromisoformat(started.replace("Z", "+00:00"))
        t1 = dt.datetime.fromisoformat(ended.replace("Z", "+00:00"))
        duration = round((t1 - t0).total_seconds(), 3)
    update_manifest(
        run_dir, status=status, end_reason=end_reason, ended_at=ended, duration_s=duration,
        **fields,
    )


# --- the record sink ------------------------------------------------------------------
class RecordSink:
    """Append-only JSONL of record rows for one process. Rows are buffered and written at
    least every FLUSH_INTERVAL_S (by `add` itself, or by the caller's periodic `flush`),
    so a kill -9 loses at most the last half second. Known secrets are scrubbed from
    every string before it reaches the disk."""

    def __init__(self, run_dir: Path, tag: str, folder: str = RECORDS_DIR) -> None:
        self._out = JsonlAppender(run_dir / folder, tag)
        self.path = self._out.path
        self._last_flush = time.monotonic()
        self._secrets = known_secrets()

    @property
    def rows_written(self) -> int:
        return self._out.rows_written

    def add(self, row: Mapping[str, Any]) -> None:
        line = json_codec.dumps(row, default=_json_default).decode()
        if self._secrets:
            line = scrub(line, self._secrets)
        self._out.append(line)
        if time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
            self.flush()

    def add_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.add(row)

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        self._out.flush()

    def close(self) -> None:
        self._out.close()


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


# --- consolidation --------------------------------------------------------------------
def arrow_types() -> dict[str, pa.DataType]:
    """The Parquet type of each kind of record field (core/records.py: the fields and
    kinds); built when asked, so that importing this module does not load pyarrow."""
    import pyarrow as pa

    return {
        "str": pa.string(),
        "float": pa.float64(),
        "int": pa.int64(),
        "bool": pa.bool_(),
        "list[float]": pa.list_(pa.float64()),
        "list[int]": pa.list_(pa.int64()),
    }


def requests_schema() -> pa.Schema:
    """requests.parquet's schema: one column per record field, typed by its kind."""
    import pyarrow as pa

    types = arrow_types()
    return pa.schema([pa.field(c.name, types[c.kind]) for c in records.RECORD_COLUMNS])


def read_record_rows(run_dir: Path) -> tuple[list[dict[str, Any]], int]:
    """All rows from the JSONL sinks, deduplicated by (request_id, attempt). Returns the
    rows and the number of unreadable lines (a line cut short by a kill is expected)."""
    values, bad = read_jsonl_folder(run_dir / RECORDS_DIR)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for row in values:
        if not isinstance(row, dict) or "request_id" not in row:
            bad += 1
            continue
        rows[(str(row["request_id"]), int(row.get("attempt") or 1))] = row
    ordered = sorted(rows.values(), key=lambda r: (r.get("sent_ts") or 0.0, r["request_id"]))
    return ordered, bad


def consolidate(run_dir: Path) -> Path:
    """Write `requests.parquet` from the JSONL sinks (idempotent)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, _bad = read_record_rows(run_dir)
    schema = requests_schema()
    columns: dict[str, list[Any]] = {}
    for c in records.RECORD_COLUMNS:  # read when called: the record's schema, not a copy
        values = [row.get(c.name) for row in rows]
        if c.kind.startswith("list"):
            values = [v if v is not None else [] for v in values]
        columns[c.name] = values
    table = pa.table(columns, schema=schema)
    out = run_dir / REQUESTS_FILE
    tmp = run_dir / (REQUESTS_FILE + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, out)
    return out
