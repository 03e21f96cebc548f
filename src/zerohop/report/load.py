"""Read one results folder into DataFrames: the only module that touches the files.

The analysis modules take a `RunData` and never open a file, so they are tested on
DataFrames built in memory. A run killed before consolidation has no
requests.parquet; its per-process `records/*.jsonl` sinks are read instead (a torn
last line is skipped and counted). Bad input raises `ReportInputError` with one line
that names the problem; the CLI turns it into exit 2.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from zerohop.results import read_record_rows

MANIFEST_SCHEMA = "zerohop.run"
MICROBENCH_FILE = "microbench.json"

# Scalar request columns the analysis reads, with the dtype each becomes. Columns a
# (possibly older) file lacks are added as all-missing, so analysis code can rely on
# every one of them existing.
FLOAT_COLUMNS: tuple[str, ...] = (
    "scheduled_ts",
    "sent_ts",
    "first_content_ts",
    "end_ts",
    "schedule_lag_ms",
    "ttft_ms",
    "e2e_ms",
    "tpot_ms",
    "ttft_from_schedule_ms",
    "e2e_from_schedule_ms",
    "input_tokens",
    "output_tokens",
    "http_status",
    "server_ttft_ms",
    # client policies (retries, fallbacks): report/policy.py
    "attempt",
    "retry_after_s",
    "backoff_ms",
    "logical_e2e_ms",
    "logical_ttft_ms",
    # token counts, the client's beside the server's: report/token_counts.py
    "counted_output_tokens",
    "target_input_tokens",
)
TEXT_COLUMNS: tuple[str, ...] = ("error_type", "error_message")
CATEGORY_COLUMNS: tuple[str, ...] = (
    "workload", "outcome", "adapter", "model", "final_outcome", "answered_by",
    "give_up_reason", "attempt_reason", "token_source", "prompt_token_source",
)
LIST_COLUMN = "itl_ms"
REQUEST_COLUMNS: tuple[str, ...] = CATEGORY_COLUMNS + FLOAT_COLUMNS + TEXT_COLUMNS
TELEMETRY_COLUMNS: tuple[str, ...] = ("ts", "source", "metric", "labels", "value")


class ReportInputError(ValueError):
    """A results folder the report cannot read; the message is one line for the user."""


@dataclass(frozen=True)
class ItlColumn:
    """The `itl_ms` lists of every request, flattened: request i owns
    `values[offsets[i]:offsets[i + 1]]`. Kept out of the DataFrame because a million
    Python lists would cost more than the whole rest of the report."""

    values: np.ndarray
    offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def pooled(self, row_mask: np.ndarray) -> np.ndarray:
        """All gaps of the selected requests in one array (ITL is pooled across requests)."""
        per_value = np.repeat(np.asarray(row_mask, dtype=bool), self.lengths)
        return self.values[per_value]

    def row_max(self) -> np.ndarray:
        """Largest gap of each request (NaN where a request has none)."""
        out = np.full(self.lengths.size, np.nan)
        nonempty = self.lengths > 0
        if self.values.size:
            starts = self.offsets[:-1][nonempty]
            out[nonempty] = np.maximum.reduceat(self.values, starts)
        return out

    @classmethod
    def empty(cls, n_rows: int) -> ItlColumn:
        return cls(values=np.array([], dtype=float), offsets=np.zeros(n_rows + 1, np.int64))


@dataclass
class RunData:
    """Everything one run left behind, as plain tables."""

    run_dir: Path
    manifest: dict[str, Any]
    requests: pd.DataFrame
    itl: ItlColumn
    telemetry: pd.DataFrame
    microbench: dict[str, Any] | None
    requests_source: Literal["parquet", "jsonl"]
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """Short name for headings: the run id, else the folder name."""
        run_id = self.manifest.get("run_id")
        return str(run_id) if run_id else self.run_dir.name


def load_run(run_dir: Path) -> RunData:
    """Read manifest.json, the request records, telemetry.parquet and microbench.json."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise ReportInputError(f"results folder not found: {run_dir}")
    if not run_dir.is_dir():
        raise ReportInputError(f"not a results folder (not a directory): {run_dir}")
    notes: list[str] = []
    manifest = read_manifest(run_dir / "manifest.json")
    requests, itl, source = _read_requests(run_dir, notes)
    telemetry = _read_telemetry(run_dir / "telemetry.parquet", notes)
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
    )


def read_manifest(path: Path) -> dict[str, Any]:
    """manifest.json as a dict, checked just enough that the report can trust it."""
    if not path.is_file():
        raise ReportInputError(f"no manifest.json in {path.parent}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportInputError(f"malformed manifest {path}: {exc}") from None
    if not isinstance(manifest, dict):
        raise ReportInputError(f"malformed manifest {path}: top level is not an object")
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


def frame_from_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[pd.DataFrame, ItlColumn]:
    """Request records (dicts with RECORD_FIELDS keys) → the analysis tables. Used by
    the JSONL path and by tests that build runs in memory."""
    columns: dict[str, list[Any]] = {name: [] for name in REQUEST_COLUMNS}
    itl_values: list[float] = []
    lengths: list[int] = []
    for row in rows:
        for name in REQUEST_COLUMNS:
            columns[name].append(row.get(name))
        gaps = row.get(LIST_COLUMN) or []
        itl_values.extend(float(v) for v in gaps)
        lengths.append(len(gaps))
    frame = _typed_frame(
        {name: pd.Series(values, dtype=object) for name, values in columns.items()}
    )
    offsets = np.concatenate(([0], np.cumsum(np.asarray(lengths, dtype=np.int64))))
    return frame, ItlColumn(np.asarray(itl_values, dtype=float), offsets.astype(np.int64))


# --- requests ------------------------------------------------------------------------
def _read_requests(
    run_dir: Path, notes: list[str]
) -> tuple[pd.DataFrame, ItlColumn, Literal["parquet", "jsonl"]]:
    parquet_path = run_dir / "requests.parquet"
    if parquet_path.is_file():
        frame, itl = _read_requests_parquet(parquet_path)
        return frame, itl, "parquet"
    sinks = sorted((run_dir / "records").glob("*.jsonl"))
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


def _read_requests_parquet(path: Path) -> tuple[pd.DataFrame, ItlColumn]:
    try:
        schema = pq.read_schema(path)
        present = [name for name in (*REQUEST_COLUMNS, LIST_COLUMN) if name in schema.names]
        dictionary = [name for name in CATEGORY_COLUMNS if name in present]
        table = pq.read_table(path, columns=present, read_dictionary=dictionary)
    except (OSError, pa.ArrowException) as exc:
        raise ReportInputError(f"unreadable requests.parquet {path}: {exc}") from None
    for required in ("workload", "outcome"):
        if required not in table.column_names:
            raise ReportInputError(f"requests.parquet {path} lacks the column {required!r}")
    if LIST_COLUMN in table.column_names:
        itl = _itl_from_arrow(table.column(LIST_COLUMN))
        table = table.drop_columns([LIST_COLUMN])
    else:
        itl = ItlColumn.empty(table.num_rows)
    frame = table.to_pandas()
    return _typed_frame({name: frame[name] for name in frame.columns}), itl


def _itl_from_arrow(column: pa.ChunkedArray) -> ItlColumn:
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy().astype(np.int64)
    values = pc.list_flatten(column).to_numpy().astype(float, copy=False)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return ItlColumn(values=values, offsets=offsets)


def _read_requests_jsonl(sinks: list[Path], notes: list[str]) -> tuple[pd.DataFrame, ItlColumn]:
    """The sinks of a run that never consolidated (killed): the same rows, deduplicated,
    that `zerohop consolidate` would write."""
    rows, bad = read_record_rows(sinks[0].parent.parent)
    if bad:
        notes.append(f"skipped {bad} unreadable line(s) in records/*.jsonl")
    if not rows:
        raise ReportInputError(f"records/*.jsonl in {sinks[0].parent.parent} hold no records")
    return frame_from_rows(rows)


def _typed_frame(columns: Mapping[str, pd.Series]) -> pd.DataFrame:
    """Give every analysis column one dtype whatever the source: floats (NaN for
    missing), categories for the grouping keys, plain strings (or None) for text."""
    n = len(next(iter(columns.values()))) if columns else 0
    out: dict[str, Any] = {}
    for name in CATEGORY_COLUMNS:
        series = columns.get(name)
        if series is None:
            out[name] = pd.Categorical([None] * n)
        elif isinstance(series.dtype, pd.CategoricalDtype):
            out[name] = series.cat.remove_unused_categories().array
        else:
            out[name] = pd.Categorical([_text_or_none(v) for v in series])
    for name in FLOAT_COLUMNS:
        series = columns.get(name)
        out[name] = (
            np.full(n, np.nan)
            if series is None
            else pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        )
    for name in TEXT_COLUMNS:
        series = columns.get(name)
        # Kept in the source's string dtype: only the few failed rows are ever read.
        out[name] = (
            pd.Series([None] * n, dtype=object) if series is None else series.reset_index(drop=True)
        )
    frame = pd.DataFrame(out)
    frame["workload"] = _fill_category(frame["workload"], "(unnamed)")
    frame["outcome"] = _fill_category(frame["outcome"], "cancelled")
    return frame


def category_codes(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes (-1 = missing) and the names they index, of a categorical
    column: selecting by code is far faster than comparing a million strings."""
    if not isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype("category")
    return series.cat.codes.to_numpy(), [str(c) for c in series.cat.categories]


def _fill_category(series: pd.Series, default: str) -> pd.Series:
    """Missing grouping keys get a visible name instead of vanishing from groupbys."""
    if not series.isna().any():
        return series
    if default not in series.cat.categories:
        series = series.cat.add_categories([default])
    return series.fillna(default)


def _text_or_none(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


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
