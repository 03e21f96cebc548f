"""microbench.json (schema v1) → the rows and the PCIe curve the report shows.

Read with plain dicts and light checks on purpose: the report must not break because
the microbenchmark's own models changed, and a half-written or partial file should
still show what it has. Anything unexpected becomes a note, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BENCHMARK_ORDER: tuple[str, ...] = ("launch", "ring", "pcie")
STAT_FIELDS: tuple[str, ...] = ("median", "p50", "p99", "min", "max", "mean", "stdev")


@dataclass(frozen=True)
class MicrobenchStat:
    metric: str
    unit: str
    figures: dict[str, float]  # STAT_FIELDS that were present
    n: int | None
    description: str


@dataclass(frozen=True)
class BenchmarkResult:
    name: str
    status: str
    reason: str | None
    stats: list[MicrobenchStat]


@dataclass(frozen=True)
class PcieCurvePoint:
    direction: str
    memory: str
    size_bytes: float
    gbps: float  # median of the repeats
    pct_of_link: float
    verified: bool | None


@dataclass(frozen=True)
class MicrobenchSummary:
    status: str
    reason: str | None
    created_at: str | None
    environment: list[tuple[str, str]]
    benchmarks: list[BenchmarkResult]
    curve: list[PcieCurvePoint]
    link_gbps_per_direction: float
    notes: list[str] = field(default_factory=list)


def summarise_microbench(doc: Mapping[str, Any]) -> MicrobenchSummary:
    notes: list[str] = []
    version = doc.get("schema_version")
    if version != 1:
        notes.append(f"microbench.json schema_version {version!r}; this report reads 1")
    environment = _mapping(doc.get("environment"))
    benchmarks_doc = _mapping(doc.get("benchmarks"))
    names = [n for n in BENCHMARK_ORDER if n in benchmarks_doc]
    names += sorted(n for n in benchmarks_doc if n not in BENCHMARK_ORDER)
    benchmarks = [_benchmark(str(name), benchmarks_doc[name], notes) for name in names]
    pcie = _mapping(benchmarks_doc.get("pcie"))
    link = _number(_mapping(environment.get("pcie")).get("theoretical_gbps_per_direction"))
    return MicrobenchSummary(
        status=str(doc.get("status", "unknown")),
        reason=_text(doc.get("reason")),
        created_at=_text(doc.get("created_at")),
        environment=_flatten_environment(environment),
        benchmarks=benchmarks,
        curve=_curve(pcie.get("curve"), notes),
        link_gbps_per_direction=link,
        notes=notes,
    )


def _benchmark(name: str, body: Any, notes: list[str]) -> BenchmarkResult:
    if not isinstance(body, Mapping):
        notes.append(f"benchmark {name!r} is not an object: left out")
        return BenchmarkResult(name, "unreadable", None, [])
    stats = []
    metrics = _mapping(body.get("metrics"))
    for metric, stat in metrics.items():
        if not isinstance(stat, Mapping):
            notes.append(f"{name}.{metric} is not a Stat object: left out")
            continue
        figures = {k: _number(stat.get(k)) for k in STAT_FIELDS if k in stat}
        n = stat.get("n")
        stats.append(
            MicrobenchStat(
                metric=str(metric),
                unit=str(stat.get("unit", "")),
                figures=figures,
                n=int(n) if isinstance(n, int | float) and not isinstance(n, bool) else None,
                description=str(stat.get("description") or ""),
            )
        )
    return BenchmarkResult(
        name=name,
        status=str(body.get("status", "unknown")),
        reason=_text(body.get("reason")),
        stats=stats,
    )


def _curve(raw: Any, notes: list[str]) -> list[PcieCurvePoint]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        notes.append("pcie.curve is not a list: left out")
        return []
    points = []
    for item in raw:
        if not isinstance(item, Mapping):
            continue
        gbps = item.get("gbps")
        value = (
            _number(gbps.get("median", gbps.get("p50")))
            if isinstance(gbps, Mapping)
            else _number(gbps)
        )
        verified = item.get("verified")
        points.append(
            PcieCurvePoint(
                direction=str(item.get("direction", "?")),
                memory=str(item.get("memory", "?")),
                size_bytes=_number(item.get("size_bytes")),
                gbps=value,
                pct_of_link=_number(item.get("pct_of_link")),
                verified=verified if isinstance(verified, bool) else None,
            )
        )
    return sorted(points, key=lambda p: (p.direction, p.memory, p.size_bytes))


def _flatten_environment(environment: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key, value in environment.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows.extend(_flatten_environment(value, prefix=f"{name}."))
        elif isinstance(value, list):
            rows.append((name, ", ".join(str(v) for v in value)))
        else:
            rows.append((name, "—" if value is None else str(value)))
    return rows


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
