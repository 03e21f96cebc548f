"""Read one results folder into `RunData`: the analysis's one way in.

The analysis and report modules take a `RunData` and never read a run's files, so they
are tested on DataFrames built in memory. Readers outside them take only what they
need, faster: the end-of-run TTFT table (`loadgen.ttft_table`) reads three Parquet
columns, the live progress line (`runner.progress`) counts bytes in the JSONL sinks,
and consolidation and selfcheck (`storage.run_folder`, `storage.selfcheck_files`) read
their own. A run killed before consolidation has no requests.parquet; its per-process
`records/*.jsonl` sinks are read instead (a torn last line is skipped and counted). Bad
input raises `ReportInputError` with one line that names the problem; the CLI turns it
into exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from zerohop.analysis.itl_column import ExactSource, shadow
from zerohop.analysis.run_data import (
    CATEGORY_COLUMNS,
    FLOAT_COLUMNS,
    LIST_COLUMN,
    NOT_SENT_EMPTY,
    REQUEST_COLUMNS,
    TELEMETRY_COLUMNS,
    ItlColumn,
    ProbeRecords,
    ReportInputError,
    RunData,
    frame_from_rows,
    typed_frame,
)
from zerohop.core.layout import (
    ANSWERS_FILE,
    MANIFEST_FILE,
    MANIFEST_SCHEMA,
    MICROBENCH_FILE,
    NOT_SENT_DIR,
    PROBE_DIR,
    PROBE_PHASES_FILE,
    RECORDS_DIR,
    REQUESTS_FILE,
    TELEMETRY_FILE,
)
from zerohop.storage.jsonl import read_jsonl_folder
from zerohop.storage.run_folder import read_manifest, read_record_rows

ITL_BATCH_ROWS = 65_536  # requests per Arrow batch when reading the ITL lists
# bytes of a column chunk read at a time: unbuffered, Arrow reads a row group's whole
# chunk of ITL pages at once (hundreds of MB at a million rows per group)
READ_BUFFER_BYTES = 4 << 20


def load_run(run_dir: Path, *, exact_itl: bool = False) -> RunData:
    """Read manifest.json, the request records, telemetry.parquet and microbench.json.
    The per-token gaps are held as float32 shadows (`itl_column`), read again exactly
    where a figure prints them; `exact_itl` holds them as float64 instead (twice the
    memory) for a reader that reads them once and lets them go (`zerohop compare`)."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise ReportInputError(f"results folder not found: {run_dir}")
    if not run_dir.is_dir():
        raise ReportInputError(f"not a results folder (not a directory): {run_dir}")
    notes: list[str] = []
    manifest = checked_manifest(run_dir)
    requests, itl, source = _read_requests(run_dir, notes, exact_itl)
    telemetry = _read_telemetry(run_dir / TELEMETRY_FILE, notes)
    microbench = _read_microbench(run_dir / MICROBENCH_FILE, notes)
    return RunData(
        run_dir=run_dir,
        manifest=manifest,
        requests=requests,
        itl=itl,
        telemetry=telemetry,
        microbench=microbench,
        requests_source=source,
        notes=notes,
        probe=_read_probe(run_dir, notes),
        answers=read_answers(run_dir, notes),
        not_sent=_read_not_sent(run_dir, notes),
    )


def _read_not_sent(run_dir: Path, notes: list[str]) -> pd.DataFrame:
    """The arrivals never sent (not_sent/*.jsonl): their workload, when they were due and
    when the end of the run turned them away."""
    folder = run_dir / NOT_SENT_DIR
    if not folder.is_dir():
        return NOT_SENT_EMPTY.copy()
    rows, bad = read_jsonl_folder(folder)
    if bad:
        notes.append(f"skipped {bad} unreadable line(s) in {NOT_SENT_DIR}/*.jsonl")
    def times(name: str) -> pd.Series:
        values = (row.get(name) for row in rows)
        return pd.Series([v if isinstance(v, int | float) else None for v in values],
                         dtype=float)

    return pd.DataFrame({
        "workload": pd.Series([str(row.get("workload")) for row in rows], dtype=str),
        "scheduled_ts": times("scheduled_ts"), "end_ts": times("end_ts"),
    })


def _read_probe(run_dir: Path, notes: list[str]) -> ProbeRecords | None:
    """The interference probe's records and phases (None when no probe ran)."""
    folder = run_dir / PROBE_DIR
    if not folder.is_dir():
        return None
    try:
        phases = json.loads((folder / PROBE_PHASES_FILE).read_text())
    except (OSError, ValueError) as exc:
        notes.append(f"probe/{PROBE_PHASES_FILE} unreadable ({exc}): the probe is left out")
        return None
    rows, bad = read_jsonl_folder(folder)
    if bad:
        notes.append(f"skipped {bad} unreadable line(s) in probe/*.jsonl")
    frame, _ = frame_from_rows(rows)
    return ProbeRecords(requests=frame, phases=phases if isinstance(phases, dict) else {})


def read_answers(run_dir: Path, notes: list[str] | None = None) -> dict[str, Any] | None:
    """The answer probe's answers.json (None when no answer probe ran, or, with a note,
    when it cannot be read)."""
    path = Path(run_dir) / ANSWERS_FILE
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        if notes is not None:
            notes.append(f"{ANSWERS_FILE} unreadable ({exc}): the answer probe is left out")
        return None
    return document if isinstance(document, dict) else None


def checked_manifest(run_dir: Path) -> dict[str, Any]:
    """manifest.json (read by `run_folder.read_manifest`, the one reader), checked just
    enough that the report can trust it."""
    path = run_dir / MANIFEST_FILE
    if not path.is_file():
        raise ReportInputError(f"no manifest.json in {run_dir}")
    try:
        manifest = read_manifest(run_dir)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportInputError(f"malformed manifest {path}: {exc}") from None
    except ValueError as exc:  # not an object
        raise ReportInputError(str(exc)) from None
    schema = manifest.get("schema")
    if schema != MANIFEST_SCHEMA:
        raise ReportInputError(
            f"malformed manifest {path}: schema is {schema!r}, expected {MANIFEST_SCHEMA!r}"
        )
    expected_types: dict[str, tuple[type, ...]] = {
        "target": (dict,),
        "workloads": (list,),
        "load": (dict,),
        "slo": (dict,),
        "config": (dict,),
        "versions": (dict,),
        "host": (dict,),
        "gpu": (list,),
        "client_fidelity": (dict,),
        "client_certificate": (dict,),
        "duration_s": (int, float),
    }
    for key, types in expected_types.items():
        value = manifest.get(key)
        if value is not None and not isinstance(value, types):
            wanted = " or ".join(t.__name__ for t in types)
            raise ReportInputError(
                f"malformed manifest {path}: field {key!r} should be {wanted}, "
                f"got {type(value).__name__}"
            )
    return manifest


# --- requests ------------------------------------------------------------------------
def _read_requests(
    run_dir: Path, notes: list[str], exact_itl: bool = False,
) -> tuple[pd.DataFrame, ItlColumn, Literal["parquet", "jsonl"]]:
    parquet_path = run_dir / REQUESTS_FILE
    if parquet_path.is_file():
        frame, itl = _read_requests_parquet(parquet_path, exact_itl)
        return frame, itl, "parquet"
    sinks = sorted((run_dir / RECORDS_DIR).glob("*.jsonl"))
    if not sinks:
        raise ReportInputError(
            f"no requests.parquet and no records/*.jsonl in {run_dir}: nothing to report"
        )
    frame, itl = _read_requests_jsonl(sinks, notes)
    notes.append(
        f"requests.parquet missing: read {len(frame)} records from {len(sinks)} "
        "records/*.jsonl sink(s) (run not consolidated)"
    )
    return frame, itl, "jsonl"


def _read_requests_parquet(path: Path, exact_itl: bool = False,
                           ) -> tuple[pd.DataFrame, ItlColumn]:
    """One column at a time, straight into the arrays the analysis keeps: at ten
    million records a whole-table read and its pandas copy would double the memory
    (tests/bench/bench_report_scale.py)."""
    try:
        names = pq.read_schema(path).names
        dictionary = [name for name in CATEGORY_COLUMNS if name in names]
        # pre_buffer (pyarrow's default) keeps every column chunk read for as long as
        # the file is open: gigabytes of ITL pages at ten million records
        parquet = pq.ParquetFile(path, read_dictionary=dictionary, pre_buffer=False,
                                 buffer_size=READ_BUFFER_BYTES)
        for required in ("workload", "outcome"):
            if required not in names:
                raise ReportInputError(f"requests.parquet {path} lacks the column {required!r}")
        columns = {}
        for name in REQUEST_COLUMNS:
            if name in names:
                columns[name] = _request_column(parquet, name)
                # mimalloc keeps what a column's read freed: handed back at once, the
                # read's peak stays one column above what is kept (issue 42)
                pa.default_memory_pool().release_unused()
        itl = (
            _read_itl(parquet, None if exact_itl else path)
            if LIST_COLUMN in names
            else ItlColumn.empty(parquet.metadata.num_rows)
        )
    except (OSError, pa.ArrowException) as exc:
        raise ReportInputError(f"unreadable requests.parquet {path}: {exc}") from None
    pa.default_memory_pool().release_unused()  # Arrow's read buffers, no longer needed
    return typed_frame(columns), itl


def _request_column(parquet: pq.ParquetFile, name: str) -> pd.Series | np.ndarray:
    """A float column as a float64 array (NaN for null), any other as a Series
    (categories stay dictionary-coded from the file)."""
    column = parquet.read(columns=[name]).column(0)
    if name not in FLOAT_COLUMNS:
        return column.to_pandas()
    if column.null_count == len(column):
        return np.broadcast_to(np.nan, len(column))  # a column nobody filled: no memory
    if pa.types.is_floating(column.type) or pa.types.is_integer(column.type):
        return column.cast(pa.float64()).to_numpy()
    return column.to_pandas()


def _read_itl(parquet: pq.ParquetFile, path: Path | None) -> ItlColumn:
    """The `itl_ms` lists, flattened batch by batch into one float32 array of their
    shadows (`itl_column.shadow`: half the memory of float64) sized from the file's
    metadata (an upper bound: an empty list counts one slot); the exact gaps are read
    again from `path` by the figures that print them (None: held exact, float64).
    Small batches keep Arrow's buffers small and reused
    (tests/bench/bench_report_scale.py)."""
    meta = parquet.metadata
    leaf = next(
        i
        for i in range(meta.num_columns)
        if meta.schema.column(i).path.split(".")[0] == LIST_COLUMN
    )
    bound = sum(meta.row_group(g).column(leaf).num_values for g in range(meta.num_row_groups))
    values = np.empty(bound, dtype=np.float64 if path is None else np.float32)
    offsets = np.zeros(meta.num_rows + 1, dtype=np.int64)
    pos = row = 0
    for batch in parquet.iter_batches(batch_size=ITL_BATCH_ROWS, columns=[LIST_COLUMN]):
        lists = batch.column(0)
        lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy()
        flat = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
        if pos + flat.size > values.size:  # a writer that counts slots otherwise
            values = np.concatenate([values[:pos], np.empty(flat.size, values.dtype)])
        values[pos : pos + flat.size] = flat if path is None else shadow(flat)
        offsets[row + 1 : row + 1 + lengths.size] = pos + np.cumsum(lengths)
        pos += flat.size
        row += lengths.size
        del batch, lists, flat
        pa.default_memory_pool().release_unused()  # as for the columns above
    return ItlColumn(values=values[:pos], offsets=offsets,
                     exact_source=None if path is None else _exact_itl(path))


def _exact_itl(path: Path) -> ExactSource:
    """The exact float64 gaps of requests.parquet, flat, a batch of requests at a
    time, in the file's order (a file changed since the first read: ReportInputError)."""

    def batches(batch_rows: int) -> Iterator[np.ndarray]:
        try:
            parquet = pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
            rows = min(batch_rows, ITL_BATCH_ROWS)  # smaller batches: smaller Arrow buffers
            for batch in parquet.iter_batches(batch_size=rows, columns=[LIST_COLUMN]):
                yield pc.list_flatten(batch.column(0)).to_numpy(zero_copy_only=False)
                del batch
                pa.default_memory_pool().release_unused()
        except (OSError, pa.ArrowException) as exc:
            raise ReportInputError(f"unreadable requests.parquet {path}: {exc}") from None

    return batches


def _read_requests_jsonl(sinks: list[Path], notes: list[str]) -> tuple[pd.DataFrame, ItlColumn]:
    """The sinks of a run that never consolidated (killed): the same rows, deduplicated,
    that `zerohop consolidate` would write."""
    rows, bad = read_record_rows(sinks[0].parent.parent)
    if bad:
        notes.append(f"skipped {bad} unreadable line(s) in records/*.jsonl")
    if not rows:
        raise ReportInputError(f"records/*.jsonl in {sinks[0].parent.parent} hold no records")
    return frame_from_rows(rows)


# --- telemetry -----------------------------------------------------------------------
def _read_telemetry(path: Path, notes: list[str]) -> pd.DataFrame:
    empty = pd.DataFrame(
        {
            "ts": np.array([], float),
            "source": pd.Categorical([]),
            "metric": pd.Categorical([]),
            "labels": pd.Categorical([]),
            "value": np.array([], float),
        }
    )
    if not path.is_file():
        notes.append("no telemetry.parquet: telemetry lanes and correlation are empty")
        return empty
    try:
        schema = pq.read_schema(path)
        missing = [name for name in TELEMETRY_COLUMNS if name not in schema.names]
        if missing:
            notes.append(f"telemetry.parquet lacks column(s) {missing}: ignored")
            return empty
        table = pq.read_table(
            path, columns=list(TELEMETRY_COLUMNS), read_dictionary=["source", "metric", "labels"]
        )
    except (OSError, pa.ArrowException) as exc:
        notes.append(f"telemetry.parquet unreadable ({exc}): ignored")
        return empty
    frame = table.to_pandas()
    frame["ts"] = pd.to_numeric(frame["ts"], errors="coerce").astype(float)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    for name in ("source", "metric", "labels"):
        if not isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype("category")
    return frame


def _read_microbench(path: Path, notes: list[str]) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        notes.append(f"microbench.json unreadable ({exc}): section left out")
        return None
    if not isinstance(data, dict) or data.get("schema") != "zerohop.microbench":
        notes.append("microbench.json is not a zerohop.microbench document: section left out")
        return None
    return data
