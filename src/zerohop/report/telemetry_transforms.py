"""Raw Prometheus series named for a reader: which family a series belongs to and its
role in it (a bucket, the sum, a counter, info, a gauge), and label sets in numeric
order (`le=2.0` before `le=1920.0`). It only names and sorts: the arithmetic that
makes a counter a rate and buckets a quantile lives in `zerohop.analysis.counters`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Role = Literal["bucket", "sum", "count", "counter", "info", "gauge"]
_NUMBER = re.compile(r"([+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|Inf))")


@dataclass(frozen=True)
class Family:
    """What a raw metric name is: its family (`vllm:time_to_first_token_seconds`) and
    its role in it (a bucket, the sum, the count, a plain counter, info, a gauge)."""

    name: str
    role: Role


def family_of(metric: str) -> Family:
    for suffix, role in (("_bucket", "bucket"), ("_sum", "sum"), ("_count", "count")):
        if metric.endswith(suffix):
            return Family(metric[: -len(suffix)], role)  # type: ignore[arg-type]
    if metric.endswith("_total"):
        return Family(metric, "counter")
    if metric.endswith("_info"):
        return Family(metric, "info")
    return Family(metric, "gauge")


def natural_key(text: str) -> tuple[tuple[int, float, str], ...]:
    """Sort key reading numbers as numbers: `le=2.0` before `le=1920.0`, `+Inf` last,
    `gpu=2` before `gpu=10`."""
    parts: list[tuple[int, float, str]] = []
    for piece in _NUMBER.split(text):
        if not piece:
            continue
        if _NUMBER.fullmatch(piece):
            parts.append((0, float(piece.replace("Inf", "inf")), ""))
        else:
            parts.append((1, 0.0, piece))
    return tuple(parts)


def label_sort_key(labels: Mapping[str, str]) -> tuple[tuple[str, tuple], ...]:
    """A label set's sort key: by label name, each value in natural order."""
    return tuple((key, natural_key(labels[key])) for key in sorted(labels))
