"""From Prometheus text exposition to telemetry rows: parse, map, differentiate.

Pure functions and one small state machine (`PromDeriver`) per scraped endpoint, so
the mapping is tested on recorded exposition texts without any server. Counters become
per-second rates between consecutive scrapes; histograms become quantiles of the
*bucket deltas* between scrapes, i.e. of the requests observed in that window. The
arithmetic and its reset rule live in `zerohop.analysis.counters`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from zerohop.analysis.counters import bucket_increases, counter_rate, histogram_quantile
from zerohop.telemetry.canonical import (
    HISTOGRAM_MAP,
    HISTOGRAM_QUANTILES,
    SCALAR_MAP,
    histogram_metric,
    normalized_name,
)
from zerohop.telemetry.samples import Sample, labels_json


@dataclass(frozen=True, slots=True)
class RawSample:
    """One exposed sample: its name as parsed, labels, value, and its family's name/type."""

    name: str
    labels: dict[str, str]
    value: float
    family: str
    type: str


def parse_exposition(text: str) -> list[RawSample]:
    """All samples of a text exposition (prometheus_client's parser), without the
    `_created` timestamps, which carry no load information. Raises ValueError on text
    that is not the exposition format."""
    out: list[RawSample] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            out.append(RawSample(s.name, dict(s.labels), float(s.value), family.name, family.type))
    return out


def raw_source(source: str) -> str:
    """`prom:host:port` → `prom-raw:host:port`: where the untouched series are kept."""
    kind, _, rest = source.partition(":")
    return f"{kind}-raw:{rest}"


class PromDeriver:
    """Turns successive scrapes of one endpoint into canonical rows (+ the raw rows).

    Holds the previous scrape's counters and histogram buckets; `reset()` forgets them
    (after a gap, so a rate never spans a hole in the data)."""

    def __init__(self, source: str, *, keep_raw: bool = True) -> None:
        self.source = source
        self.raw_source = raw_source(source)
        self.keep_raw = keep_raw
        self._counters: dict[tuple[str, str], tuple[float, float]] = {}
        self._histograms: dict[tuple[str, str], tuple[float, dict[float, float]]] = {}

    def reset(self) -> None:
        self._counters.clear()
        self._histograms.clear()

    def feed(self, ts: float, samples: Sequence[RawSample]) -> list[Sample]:
        rows: list[Sample] = []
        mapped: dict[tuple[str, str], tuple[int, Sample]] = {}
        buckets: dict[tuple[str, str], dict[float, float]] = {}
        for s in samples:
            if self.keep_raw:
                rows.append(Sample(ts, self.raw_source, s.name, s.value, labels_json(s.labels)))
            if s.family in HISTOGRAM_MAP and s.name == s.family + "_bucket":
                le = _parse_le(s.labels.get("le"))
                if le is not None:
                    series = {k: v for k, v in s.labels.items() if k != "le"}
                    buckets.setdefault((s.family, labels_json(series)), {})[le] = s.value
                continue
            mapping = SCALAR_MAP.get(normalized_name(s.name))
            if mapping is None:
                continue
            labels = labels_json(s.labels)
            row: Sample | None = None
            if mapping.kind in ("gauge", "counter"):
                row = Sample(ts, self.source, mapping.canonical, s.value * mapping.scale,
                             labels, s.name)
            elif mapping.kind == "rate":
                key = (s.name, labels)
                previous = self._counters.get(key)
                self._counters[key] = (ts, s.value)
                rate = None if previous is None else counter_rate(
                    previous[1], previous[0], s.value, ts)
                if rate is not None:
                    row = Sample(ts, self.source, mapping.canonical, rate * mapping.scale,
                                 labels, s.name)
            if row is not None:
                # a server exposing a new and an old name for one thing (vLLM's
                # kv_cache_usage_perc and gpu_cache_usage_perc) yields one row: the newer
                rank = _PRIORITY[normalized_name(s.name)]
                held = mapped.get((row.metric, labels))
                if held is None or rank < held[0]:
                    mapped[(row.metric, labels)] = (rank, row)
        rows.extend(row for _, row in mapped.values())
        for (family, labels), counts in buckets.items():
            rows.extend(self._histogram_rows(ts, family, labels, counts))
        return rows

    def _histogram_rows(self, ts: float, family: str, labels: str,
                        counts: dict[float, float]) -> Iterable[Sample]:
        key = (family, labels)
        previous = self._histograms.get(key)
        self._histograms[key] = (ts, counts)
        if previous is None:
            return []
        window = bucket_deltas(previous[1], counts)
        rows = []
        for qname, q in HISTOGRAM_QUANTILES:
            value = histogram_quantile(q, window)
            if not math.isnan(value):
                metric = histogram_metric(HISTOGRAM_MAP[family], qname)
                rows.append(Sample(ts, self.source, metric, value, labels, family))
        return rows


_PRIORITY = {name: i for i, name in enumerate(SCALAR_MAP)}


def bucket_deltas(previous: dict[float, float], current: dict[float, float]
                  ) -> list[tuple[float, float]]:
    """Cumulative bucket counts of the observations made between two scrapes, sorted by
    upper bound (`bucket_increases`: a bucket that went down restarts the histogram).
    Buckets absent before count from zero."""
    bounds = sorted(current)
    pair = np.array([[previous.get(le, 0.0), current[le]] for le in bounds], dtype=float)
    window = bucket_increases(pair.reshape(len(bounds), 2))[:, 1]
    return list(zip(bounds, window.tolist(), strict=True))


def _parse_le(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
