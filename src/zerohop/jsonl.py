"""Reading the append-only JSONL sinks that records and telemetry are flushed to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


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
