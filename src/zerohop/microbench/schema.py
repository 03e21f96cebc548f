"""`microbench.json`, schema v1: the contract between the microbenchmarks and the report.

These models are the shape's single definition. Files are versioned so that an older
file can still be read: `load_microbench` validates, and upgrades older versions through
`MIGRATIONS` (one function per step) before validating.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

SCHEMA_NAME = "zerohop.microbench"
SCHEMA_VERSION = 1
BENCHMARK_NAMES = ("launch", "ring", "pcie")

Status = Literal["ok", "partial", "skipped", "failed"]
Direction = Literal["h2d", "d2h", "bidir"]
MemoryKind = Literal["pinned", "pageable"]

# Relative slack for the ordering checks (float rounding in percentiles).
_ORDER_TOLERANCE = 1e-9


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Stat(_Strict):
    """Summary of repeated samples of one measured quantity (unit in the object)."""

    unit: str = Field(min_length=1)
    median: float
    p50: float
    p99: float
    min: float
    max: float
    mean: float
    stdev: float = Field(ge=0)
    n: int = Field(ge=1)
    description: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> Stat:
        slack = _ORDER_TOLERANCE * max(1.0, abs(self.max), abs(self.min))
        if not (self.min - slack <= self.p50 <= self.p99 + slack <= self.max + 2 * slack):
            raise ValueError(
                f"percentiles out of order: min={self.min} p50={self.p50} "
                f"p99={self.p99} max={self.max}"
            )
        if not math.isclose(self.median, self.p50, rel_tol=1e-9, abs_tol=slack):
            raise ValueError(f"median ({self.median}) must equal p50 ({self.p50})")
        if not (self.min - slack <= self.mean <= self.max + slack):
            raise ValueError(f"mean {self.mean} outside [min, max]")
        return self


class PcieLink(_Strict):
    """The PCIe link as NVML reports it. `gen`/`width` are read while a large copy runs
    (idle links drop to a low generation to save power); the theoretical figure follows
    from them (see `pcie_limit.theoretical_gbps_per_direction`)."""

    gen: int | None = None
    width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None
    theoretical_gbps_per_direction: float | None = Field(default=None, gt=0)


class Clocks(_Strict):
    sm_mhz: int | None = None
    mem_mhz: int | None = None


class Environment(_Strict):
    """What the numbers were measured on. Every field may be unknown (None): a skipped
    run has no GPU, and NVML may be missing where CUDA works."""

    gpu_name: str | None = None
    gpu_uuid: str | None = None
    driver_version: str | None = None
    cuda_driver_version: int | None = None
    cuda_runtime_version: int | None = None
    cupy_version: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    pcie: PcieLink = Field(default_factory=PcieLink)
    clocks_before: Clocks = Field(default_factory=Clocks)
    clocks_after: Clocks = Field(default_factory=Clocks)
    clock_event_reasons_before: list[str] = Field(default_factory=list)
    clock_event_reasons_after: list[str] = Field(default_factory=list)


class CurvePoint(_Strict):
    """One point of the PCIe sweep."""

    direction: Direction
    memory: MemoryKind
    size_bytes: int = Field(ge=1)
    gbps: Stat
    pct_of_link: float | None = Field(default=None, ge=0)
    verified: bool


class BenchmarkResult(_Strict):
    status: Status
    reason: str | None = None
    metrics: dict[str, Stat] = Field(default_factory=dict)
    curve: list[CurvePoint] | None = None  # the PCIe sweep only

    @model_validator(mode="after")
    def _reason_when_not_ok(self) -> BenchmarkResult:
        if self.status != "ok" and not self.reason:
            raise ValueError(f"status {self.status!r} needs a reason")
        return self

    @model_serializer(mode="wrap")
    def _omit_absent_curve(self, handler: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        data = handler(self)
        if data.get("curve") is None:
            data.pop("curve", None)
        return data


class MicrobenchResult(_Strict):
    schema_: Literal["zerohop.microbench"] = Field(default="zerohop.microbench", alias="schema")
    schema_version: Literal[1] = 1
    status: Status
    reason: str | None = None
    created_at: str
    zerohop_version: str
    environment: Environment = Field(default_factory=Environment)
    benchmarks: dict[str, BenchmarkResult] = Field(default_factory=dict)

    @field_validator("created_at")
    @classmethod
    def _iso_utc(cls, value: str) -> str:
        try:
            stamp = dt.datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"created_at {value!r} is not ISO-8601") from exc
        if stamp.tzinfo is None:
            raise ValueError(f"created_at {value!r} has no time zone")
        return value

    @field_validator("benchmarks")
    @classmethod
    def _known_names(cls, value: dict[str, BenchmarkResult]) -> dict[str, BenchmarkResult]:
        unknown = sorted(set(value) - set(BENCHMARK_NAMES))
        if unknown:
            raise ValueError(f"unknown benchmark(s) {unknown}; known: {list(BENCHMARK_NAMES)}")
        return value

    @model_validator(mode="after")
    def _status_consistent(self) -> MicrobenchResult:
        if self.status in ("skipped", "failed") and not self.reason:
            raise ValueError(f"status {self.status!r} needs a reason")
        if self.status == "ok" and any(b.status != "ok" for b in self.benchmarks.values()):
            raise ValueError("status 'ok' but a benchmark is not ok")
        return self

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


def overall_status(benchmarks: Mapping[str, BenchmarkResult]) -> Status:
    """ok when every benchmark is ok, failed when none produced anything, else partial."""
    statuses = [b.status for b in benchmarks.values()]
    if not statuses:
        return "skipped"
    if all(s == "ok" for s in statuses):
        return "ok"
    if all(s in ("failed", "skipped") for s in statuses):
        return "failed"
    return "partial"


def utc_now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_microbench(result: MicrobenchResult, path: Path) -> Path:
    """Write atomically (temp file + rename): a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(result.to_json(), encoding="utf-8")
    tmp.replace(path)
    return path


# --- reading and migrating --------------------------------------------------------------
class MicrobenchFileError(ValueError):
    """The file is not a microbench result this version of zerohop can read."""


# version N -> function turning a version-N document into a version N+1 document.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def migrate(document: Mapping[str, Any]) -> dict[str, Any]:
    """Bring a decoded document to SCHEMA_VERSION, one step at a time."""
    doc = dict(document)
    if doc.get("schema") != SCHEMA_NAME:
        raise MicrobenchFileError(f"schema is {doc.get('schema')!r}, expected {SCHEMA_NAME!r}")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise MicrobenchFileError(f"schema_version {version!r} is not an integer")
    if version > SCHEMA_VERSION:
        raise MicrobenchFileError(
            f"schema_version {version} is newer than this zerohop reads ({SCHEMA_VERSION}); "
            "upgrade zerohop"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise MicrobenchFileError(f"no migration from schema_version {version}")
        doc = step(doc)
        version += 1
        doc["schema_version"] = version
    return doc


def parse_microbench(document: Mapping[str, Any]) -> MicrobenchResult:
    return MicrobenchResult.model_validate(migrate(document))


def load_microbench(path: Path | str) -> MicrobenchResult:
    """Read, migrate and validate a `microbench.json`; errors name the file."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise MicrobenchFileError(f"{path}: {exc}") from exc
    if not isinstance(document, dict):
        raise MicrobenchFileError(f"{path}: top level is not a JSON object")
    try:
        return parse_microbench(document)
    except (MicrobenchFileError, ValidationError) as exc:
        raise MicrobenchFileError(f"{path}: {exc}") from exc
