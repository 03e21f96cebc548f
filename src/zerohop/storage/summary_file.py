"""summary.json in a results folder: the run's figures for scripts (docs/summary-json.md).

Written at the end of every `zerohop run` (sweep, capacity and nightly points
included), `zerohop simulate` and `zerohop selfcheck`, after the records were
consolidated; `analysis.summary_document` lays it out from the analysis the console and
the report use. Strict JSON: a figure that does not exist (a percentile of no values, a
rate without a window) is null, never NaN; known secrets are masked as in the manifest.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from zerohop.analysis.run_data import RunData
from zerohop.analysis.summary_document import (
    SummaryParts,
    parts_of_run,
    results_of,
    summary_document,
)
from zerohop.core.exit_codes import one_line
from zerohop.core.layout import SUMMARY_FILE
from zerohop.core.redaction import known_secrets, redact
from zerohop.storage.jsonl import without_nan
from zerohop.storage.results_csv import write_results_csv
from zerohop.storage.run_reader import load_run


def write_summary(run_dir: Path, run: RunData | None = None,
                  parts: SummaryParts | None = None) -> Path:
    """Write `run_dir/summary.json` (atomically), and `results.csv` beside it, and return
    the summary's path. `run`, `parts`: the loaded run and its analysis when the caller
    has them (else read and computed here)."""
    run_dir = Path(run_dir)
    if run is None:
        run = load_run(run_dir)
    parts = parts if parts is not None else parts_of_run(run)
    parts = dataclasses.replace(parts, results=results_of(run, parts))
    path = write_document(run_dir, summary_document(run, parts))
    if parts.results is not None:
        write_results_csv(run_dir, parts.results)
    return path


def try_write_summary(run_dir: Path) -> str | None:
    """Write summary.json of a folder Locust ran alone; None when written, else why not
    in one line (the folder stays as measured: the summary is extra)."""
    try:
        write_summary(run_dir)
    except Exception as exc:
        return one_line(exc)
    return None


def write_document(run_dir: Path, document: dict[str, Any]) -> Path:
    data = redact(without_nan(document), known_secrets())
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    out = Path(run_dir) / SUMMARY_FILE
    tmp = out.with_name(SUMMARY_FILE + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out
