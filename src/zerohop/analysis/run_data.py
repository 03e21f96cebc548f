"""The tables one run becomes, and the column types every analysis may rely on.

`storage.run_reader` fills a `RunData` from a results folder; tests build one in memory
with `frame_from_rows`. Nothing here opens a file, so analysis stays pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from zerohop.analysis.input_error import ReportInputError as ReportInputError  # re-exported
from zerohop.analysis.itl_column import ItlColumn as ItlColumn  # re-exported
from zerohop.core.records import (
    CATEGORY,
    NUMBER,
    RECORD_COLUMNS,
    TEXT,
    Read,
    RecordColumn,
)


def read_as(role: Read, columns: Iterable[RecordColumn] = RECORD_COLUMNS) -> tuple[str, ...]:
    """The record fields the analysis reads in `role`, in the record's order: the record's
    schema (core/records.py) says which, so no list of columns is written here."""
    return tuple(c.name for c in columns if c.read == role)


# Scalar request columns the analysis reads, with the dtype each becomes. Columns a
# (possibly older) file lacks are added as all-missing, so analysis code can rely on
# every one of them existing.
FLOAT_COLUMNS: tuple[str, ...] = read_as(NUMBER)
TEXT_COLUMNS: tuple[str, ...] = read_as(TEXT)
CATEGORY_COLUMNS: tuple[str, ...] = read_as(CATEGORY)
LIST_COLUMN = "itl_ms"
REQUEST_COLUMNS: tuple[str, ...] = CATEGORY_COLUMNS + FLOAT_COLUMNS + TEXT_COLUMNS
TELEMETRY_COLUMNS: tuple[str, ...] = ("ts", "source", "metric", "labels", "value")


NOT_SENT_EMPTY = pd.DataFrame({"workload": pd.Series([], dtype=str),
                               "scheduled_ts": pd.Series([], dtype=float),
                               "end_ts": pd.Series([], dtype=float)})


@dataclass(frozen=True)
class ProbeRecords:
    """The interference probe's records (`--probe-rate`), kept apart from the workloads'
    so they never enter their figures, and its phases (`probe/phases.json`: the rate,
    the request's sizes, `idle_start_ts`, `load_start_ts`, `load_end_ts`)."""

    requests: pd.DataFrame
    phases: dict[str, Any]


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
    probe: ProbeRecords | None = None  # None: no probe ran
    answers: dict[str, Any] | None = None  # answers.json (`--answer-probe`); None: none ran
    # arrivals a --max-concurrency cap held until the run ended (not_sent/): offered,
    # never sent: `workload`, `scheduled_ts` (due) and `end_ts` (turned away), apart
    # from the requests
    not_sent: pd.DataFrame = field(default_factory=lambda: NOT_SENT_EMPTY.copy())

    @property
    def label(self) -> str:
        """Short name for headings: the run id, else the folder name."""
        run_id = self.manifest.get("run_id")
        return str(run_id) if run_id else self.run_dir.name


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
    frame = typed_frame(
        {name: pd.Series(values, dtype=object) for name, values in columns.items()}
    )
    offsets = np.concatenate(([0], np.cumsum(np.asarray(lengths, dtype=np.int64))))
    return frame, ItlColumn(np.asarray(itl_values, dtype=float), offsets.astype(np.int64))


def typed_frame(columns: Mapping[str, pd.Series | np.ndarray]) -> pd.DataFrame:
    """Give every analysis column one dtype whatever the source: floats (NaN for
    missing), categories for the grouping keys, plain strings (or None) for text.
    A float64 array is kept as it is, and the frame is not consolidated into 2-D
    blocks: at ten million records each copy of the floats is gigabytes. A missing
    float column is one read-only NaN broadcast to every row."""
    n = len(next(iter(columns.values()))) if columns else 0
    out: dict[str, Any] = {}
    for name in CATEGORY_COLUMNS:
        series = columns.get(name)
        if series is None:
            out[name] = pd.Categorical.from_codes(np.full(n, -1, np.int8), categories=[])
        elif isinstance(series.dtype, pd.CategoricalDtype):
            out[name] = _without_unused(pd.Series(series))
        else:
            out[name] = pd.Categorical([_text_or_none(v) for v in series])
    for name in FLOAT_COLUMNS:
        series = columns.get(name)
        if series is None:
            out[name] = np.broadcast_to(np.nan, n)
        elif isinstance(series, np.ndarray) and series.dtype == np.float64:
            out[name] = series
        else:
            out[name] = pd.to_numeric(pd.Series(series), errors="coerce").to_numpy(
                dtype=float, na_value=np.nan
            )
    for name in TEXT_COLUMNS:
        series = columns.get(name)
        # Kept in the source's string dtype: only the few failed rows are ever read.
        out[name] = (
            pd.Series([None] * n, dtype=object)
            if series is None
            else pd.Series(series).reset_index(drop=True)
        )
    frame = pd.DataFrame(out, copy=False)
    frame["workload"] = _fill_category(frame["workload"], "(unnamed)")
    frame["outcome"] = _fill_category(frame["outcome"], "cancelled")
    return frame


def category_codes(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes (-1 = missing) and the names they index, of a categorical
    column: selecting by code is far faster than comparing a million strings."""
    if not isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype("category")
    return series.cat.codes.to_numpy(), [str(c) for c in series.cat.categories]


def category_mask(series: pd.Series, test: Callable[[pd.Series], Any]) -> np.ndarray:
    """Rows whose value passes `test` (a vectorised test of a Series of names, e.g.
    `lambda s: s.str.contains(...)`), judged once per category, not once per row:
    telemetry's millions of rows hold a few hundred names. A missing value never
    passes; a column that is not categorical is tested row by row."""
    if not isinstance(series.dtype, pd.CategoricalDtype):
        names = series.astype(str)
        return np.asarray(test(names), dtype=bool) & series.notna().to_numpy()
    codes = series.cat.codes.to_numpy()
    names = pd.Series(series.cat.categories.astype(str), dtype=object)
    passed = np.append(np.asarray(test(names), dtype=bool), False)  # code -1: missing
    return passed[codes]


def _without_unused(series: pd.Series) -> pd.Categorical:
    """The categories no row uses dropped; a count of the codes finds them, ~50x
    faster than pandas' unique at 10^7 rows when there are none (the usual case)."""
    codes = series.cat.codes.to_numpy()
    used = np.bincount(codes[codes >= 0], minlength=len(series.cat.categories)) > 0
    if used.all():
        return series.array
    return series.cat.remove_unused_categories().array


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
