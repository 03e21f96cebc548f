"""JSON as zerohop keeps it: reading the append-only JSONL sinks that records and
telemetry are flushed to, and making values fit strict JSON."""

from __future__ import annotations

import json
import math
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
