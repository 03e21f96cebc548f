"""From Prometheus text exposition to telemetry rows: parse, map, differentiate.

Pure functions and one small state machine (`PromDeriver`) per scraped endpoint, so
the maths is tested on recorded exposition texts without any server. Counters become
per-second rates between consecutive scrapes (a decrease is a reset: the new value is
the increase since it); histograms become quantiles of the *bucket deltas* between
scrapes, i.e. of the requests observed in that window, interpolated linearly within a
bucket exactly as Prometheus' `histogram_quantile` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

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


def counter_rate(prev_value: float, prev_ts: float, value: float, ts: float) -> float | None:
    """Per-second increase between two readings; a decrease means the counter restarted
    from zero, so the increase is the new value. None when no time has passed."""
    dt = ts - prev_ts
    if dt <= 0:
        return None
    delta = value - prev_value
    if delta < 0:
        delta = value
    return delta / dt


def bucket_deltas(previous: dict[float, float], current: dict[float, float]
                  ) -> list[tuple[float, float]]:
    """Cumulative bucket counts of the observations made between two scrapes, sorted by
    upper bound. If any bucket went down the histogram was reset, and the current counts
    are themselves the window's counts. Buckets absent before count from zero."""
    reset = any(current.get(le, math.inf) < count for le, count in previous.items())
    out = []
    for le in sorted(current):
        before = 0.0 if reset else previous.get(le, 0.0)
        out.append((le, max(0.0, current[le] - before)))
    return out


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """The q-quantile of a classic histogram given as (upper bound, cumulative count)
    pairs sorted by bound with +Inf last, following Prometheus' histogram_quantile:
    linear interpolation inside the bucket holding the rank, the lower edge of the first
    bucket taken as 0, and a rank in the +Inf bucket answered with the highest finite
    bound. NaN without observations or without a +Inf bucket."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return math.nan
    bounds = [b for b, _ in buckets]
    counts: list[float] = []
    running = 0.0
    for _, c in buckets:  # repair non-monotonic input as Prometheus does
        running = max(running, c)
        counts.append(running)
    observations = counts[-1]
    if observations <= 0:
        return math.nan
    rank = q * observations
    b = next(i for i, c in enumerate(counts) if c >= rank)
    if b == len(buckets) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count <= 0:  # q == 0 on an empty first bucket
        return start
    return start + (end - start) * (rank / count)


def _parse_le(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
