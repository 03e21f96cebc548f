"""JSON as zerohop keeps it: the append-only JSONL files records and telemetry are
flushed to (writing and reading them), and making values fit strict JSON."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import IO, Any


def read_jsonl_folder(folder: Path) -> tuple[list[Any], int]:
    """Every JSON value in the folder's `*.jsonl` files (sorted by name), and how many
    lines could not be decoded — a line cut short by a killed writer is expected."""
    values: list[Any] = []
    bad = 0
    for path in sorted(folder.glob("*.jsonl")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                try:
                    values.append(json.loads(line))
                except json.JSONDecodeError:
                    bad += 1
    return values, bad


def without_nan(value: Any) -> Any:
    """`value` with every NaN or infinity (in nested dicts and lists) replaced by None:
    strict JSON has no NaN, and a missing figure reads as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nan(v) for v in value]
    return value


class JsonlAppender:
    """One process's append-only JSONL file: lines are buffered and written by `flush`
    (the sinks decide when), each write ending on a whole line, so a reader of a killed
    run's file loses at most a torn last line."""

    def __init__(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".jsonl")
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held open
        self._buffer: list[str] = []
        self.rows_written = 0

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def append(self, line: str) -> None:
        self._buffer.append(line)

    def flush(self) -> None:
        if not self._buffer or self._file.closed:
            return
        self._file.write("\n".join(self._buffer) + "\n")
        self._file.flush()
        self.rows_written += len(self._buffer)
        self._buffer.clear()

    def close(self) -> None:
        if not self._file.closed:
            self.flush()
            self._file.close()
