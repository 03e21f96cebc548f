"""The telemetry row, the clock that stamps it, and the bookkeeping for gaps.

Every sampler emits `Sample`s; the store writes them as rows of the long-form
`telemetry.parquet` (ts, source, metric, labels, value, raw_metric). A source that
cannot be read is not an exception: it becomes a *gap episode*, one row per episode
whose value is the gap's length in seconds (NaN while the gap is still open, or if the
run died during it), with the reason in its labels.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from zerohop.core.records import ClockAnchor

GAP = "gap"
UNSUPPORTED = "unsupported"
NAN = math.nan


@dataclass(frozen=True, slots=True)
class Sample:
    """One observation. `labels` is a JSON object with sorted keys (see `labels_json`),
    so equal label sets compare equal as strings. `raw_metric` names what a canonical
    metric was derived from (a Prometheus name, an NVML call); None when the metric is
    itself raw or a gap."""

    ts: float
    source: str
    metric: str
    value: float
    labels: str = "{}"
    raw_metric: str | None = None

    def to_list(self) -> list[object]:
        """Column order of `store.COLUMNS`; compact for the JSONL sinks."""
        return [self.ts, self.source, self.metric, self.labels, self.value, self.raw_metric]


def labels_json(labels: Mapping[str, object] | None = None) -> str:
    """Canonical JSON for a label set: sorted keys, compact, values as strings."""
    if not labels:
        return "{}"
    return json.dumps(
        {str(k): str(v) for k, v in labels.items()}, sort_keys=True, separators=(",", ":")
    )


class TelemetryClock:
    """Wall-clock seconds on the run's ClockAnchor: anchor.wall + (perf_counter − anchor.perf).

    perf_counter is CLOCK_MONOTONIC on Linux, one clock for every process on the host, so
    an agent subprocess given the parent's anchor stamps samples exactly as the parent
    stamps request records, even if the wall clock is stepped during the run."""

    def __init__(self, anchor: ClockAnchor | None = None) -> None:
        self.anchor = anchor or ClockAnchor.now()

    def now(self) -> float:
        return self.anchor.wall_s(time.perf_counter_ns())


class GapTracker:
    """Turns repeated "this is missing" observations into one gap episode each.

    Opening an episode yields a row with value NaN at once (so a run killed during the
    gap still shows it); closing it yields a row with the same ts and labels and the
    duration as value. The store keeps the closing row when both exist."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._open: dict[str, tuple[float, str]] = {}  # scope labels json -> (start, reason)

    def missing(self, ts: float, reason: str,
                scope: Mapping[str, object] | None = None) -> list[Sample]:
        key = labels_json(scope)
        if key in self._open:
            return []
        self._open[key] = (ts, reason)
        return [self._row(ts, reason, scope, NAN)]

    def present(self, ts: float, scope: Mapping[str, object] | None = None) -> list[Sample]:
        key = labels_json(scope)
        opened = self._open.pop(key, None)
        if opened is None:
            return []
        start, reason = opened
        return [self._row(start, reason, scope, max(0.0, ts - start))]

    def close_all(self, ts: float) -> list[Sample]:
        rows = []
        for key, (start, reason) in list(self._open.items()):
            scope = json.loads(key)
            rows.append(self._row(start, reason, scope, max(0.0, ts - start)))
        self._open.clear()
        return rows

    def _row(self, ts: float, reason: str, scope: Mapping[str, object] | None,
             value: float) -> Sample:
        labels = dict(scope or {})
        labels["reason"] = reason
        return Sample(ts, self.source, GAP, value, labels_json(labels))


def unsupported_row(ts: float, source: str, metric: str, reason: str,
                    scope: Mapping[str, object] | None = None) -> Sample:
    """The single row that says "this field cannot be read here" (recorded once)."""
    labels = dict(scope or {})
    labels.update(field=metric, reason=reason)
    return Sample(ts, source, UNSUPPORTED, NAN, labels_json(labels))


def describe_error(exc: BaseException) -> str:
    """A short, log-safe reason: the error's class and message, one line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return f"{name}: {text}"[:200] if text else name
