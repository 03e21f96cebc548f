"""results.csv in a results folder: the results block as a table for spreadsheets, one
row per figure (`analysis.results_table.table_rows`, the console's rows), written
beside summary.json. A figure that does not exist is an empty cell."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from zerohop.analysis.latency.results_table import ResultsTable, table_rows
from zerohop.core.atomic_file import write_text_atomically
from zerohop.core.layout import RESULTS_CSV_FILE

HEADER = ("figure", "unit", "value")


def write_results_csv(run_dir: Path, table: ResultsTable) -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    for label, unit, value in table_rows(table):
        missing = value is None or (isinstance(value, float) and math.isnan(value))
        writer.writerow((label, unit, "" if missing else repr(value)))
    path = Path(run_dir) / RESULTS_CSV_FILE
    write_text_atomically(path, buffer.getvalue())
    return path
