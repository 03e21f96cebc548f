"""The `--telemetry` flag: which sources to sample, and how often.

Grammar (comma-separated parts; "" or "none" means no telemetry):
    nvml[:interval=0.1][:pcie_interval=0.1][:gpm=1][:pcie=1]
    prom[=URL][:interval=1][:timeout=2][:raw=1]     (no URL: the target's /metrics)
    loadgen[:interval=1][:loop_lag=1]
e.g. `nvml,prom=http://127.0.0.1:8000/metrics:interval=0.5,loadgen`. Options follow the
URL after a colon; a URL's own colons (scheme, port) are never taken for options.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from zerohop.telemetry.scraper import Endpoint, strip_userinfo


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NvmlSource(_Strict):
    """This machine's GPUs through NVML."""

    kind: Literal["nvml"] = "nvml"
    interval_s: float = Field(default=0.1, gt=0, le=60,
                              description="seconds between samples")
    pcie_interval_s: float | None = Field(
        default=None, gt=0, le=60, description="seconds between PCIe throughput reads "
        "(each blocks ~20 ms per GPU and counter); default: interval_s")
    gpm: bool = Field(default=True, description="read Hopper+ GPM metrics where supported")
    pcie: bool = Field(default=True, description="read PCIe RX/TX throughput")


class PromSource(_Strict):
    """A Prometheus /metrics endpoint (vLLM, SGLang, TGI, a DCGM exporter, the sim)."""

    kind: Literal["prom"] = "prom"
    url: str | None = Field(default=None,
                            description="http(s) URL; None: the target's /metrics")
    interval_s: float = Field(default=1.0, gt=0, le=600,
                              description="seconds between scrapes")
    timeout_s: float = Field(default=2.0, gt=0, le=60,
                             description="seconds before a scrape fails")
    raw: bool = Field(default=True, description="also keep every raw series")


class LoadgenSource(_Strict):
    """The load generator's own processes: CPU, RSS, event-loop lag."""

    kind: Literal["loadgen"] = "loadgen"
    interval_s: float = Field(default=1.0, gt=0, le=60,
                              description="seconds between CPU/RSS samples")
    loop_lag: bool = Field(default=True,
                           description="run the 10 ms loop-lag probe in this process")


SourceSpec = Annotated[NvmlSource | PromSource | LoadgenSource, Field(discriminator="kind")]
SOURCE_KINDS: dict[str, type[_Strict]] = {
    "nvml": NvmlSource, "prom": PromSource, "loadgen": LoadgenSource,
}
_OPTION_NAMES = {
    "interval": "interval_s", "pcie_interval": "pcie_interval_s", "timeout": "timeout_s",
    "gpm": "gpm", "pcie": "pcie", "raw": "raw", "loop_lag": "loop_lag",
}
_OPTION = re.compile(r"^[a-z_]+=[^/=]*$")
_ADAPTER: TypeAdapter[SourceSpec] = TypeAdapter(SourceSpec)


def parse_telemetry_spec(spec: str) -> list[SourceSpec]:
    """Parse the flag; ValueError names the offending part and what would be valid."""
    text = (spec or "").strip()
    if text.lower() in ("", "none", "off"):
        return []
    sources: list[SourceSpec] = []
    seen: set[str] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise ValueError(f"--telemetry: empty part in {spec!r}")
        source = _parse_part(part)
        key = source.kind + ("=" + str(source.url) if isinstance(source, PromSource) else "")
        if key in seen:
            raise ValueError(f"--telemetry: {_safe(part)!r} is given twice")
        seen.add(key)
        sources.append(source)
    return sources


def with_target_url(sources: list[SourceSpec], metrics_url: str) -> list[SourceSpec]:
    """Fill the URL of bare `prom` parts with the target's /metrics URL."""
    return [
        s.model_copy(update={"url": metrics_url}) if isinstance(s, PromSource) and s.url is None
        else s
        for s in sources
    ]


def run_sources(spec_text: str | None, host: str | None) -> list[SourceSpec]:
    """A run's telemetry sources from its `--telemetry` text; a bare `prom` means the
    target's own /metrics."""
    metrics_url = (host or "http://127.0.0.1").rstrip("/") + "/metrics"
    return with_target_url(parse_telemetry_spec(spec_text or ""), metrics_url)


def _parse_part(part: str) -> SourceSpec:
    head, options = _split_options(part)
    kind, eq, url = head.partition("=")
    kind = kind.strip().lower()
    if kind not in SOURCE_KINDS:
        valid = ", ".join(SOURCE_KINDS)
        raise ValueError(
            f"--telemetry: unknown source {kind!r} in {_safe(part)!r} (valid: {valid})")
    fields: dict[str, object] = {"kind": kind}
    if eq:
        if kind != "prom":
            raise ValueError(f"--telemetry: {_safe(part)!r}: only prom takes =URL")
        if not url:
            raise ValueError(f"--telemetry: {_safe(part)!r}: prom= needs a URL")
        try:
            Endpoint.parse(url)
        except ValueError as exc:
            raise ValueError(f"--telemetry: {_safe(part)!r}: {exc}") from None
        fields["url"] = url
    for option in options:
        name, _, value = option.partition("=")
        field = _OPTION_NAMES.get(name)
        model = SOURCE_KINDS[kind]
        if field is None or field not in model.model_fields:
            allowed = sorted(k for k, v in _OPTION_NAMES.items() if v in model.model_fields)
            raise ValueError(
                f"--telemetry: {_safe(part)!r}: unknown option {name!r} for {kind} "
                f"(valid: {', '.join(allowed)})"
            )
        fields[field] = _bool(value) if model.model_fields[field].annotation is bool else value
    try:
        return _ADAPTER.validate_python(fields)
    except ValidationError as exc:
        problem = "; ".join(
            f"{_option_of(err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ValueError(f"--telemetry: {_safe(part)!r}: {problem}") from None


def _split_options(part: str) -> tuple[str, list[str]]:
    """Peel `:name=value` suffixes off the right end; what is left is `kind[=URL]`."""
    pieces = part.split(":")
    options: list[str] = []
    while len(pieces) > 1 and _OPTION.match(pieces[-1]):
        options.insert(0, pieces.pop())
    return ":".join(pieces), options


def _bool(value: str) -> object:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    return value  # pydantic reports it


def _option_of(loc: tuple[int | str, ...]) -> str:
    names = {v: k for k, v in _OPTION_NAMES.items()}
    field = str(loc[-1]) if loc else "?"
    return names.get(field, field)


def _safe(part: str) -> str:
    head, _, rest = part.partition("=")
    return f"{head}={strip_userinfo(rest)}" if rest else head
