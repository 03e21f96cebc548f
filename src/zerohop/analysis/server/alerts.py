"""Alert rules evaluated over a finished run: "did X stay above Y for Z seconds?"

A rule is one line::

    pcie_rx_bytes_per_s > 2.75e9 for 10s
    gpu_temp_c{gpu=0} >= 85 for 30s
    ttft_p99_ms > 500 for 1m
    kv_cache_usage_frac > 0.95          (no `for`: any single sample)

or the same as a mapping (YAML/JSON): `{series, op, threshold, for_s, labels, name}`.
Numbers take an SI suffix (`2.75G` = 2.75e9). The series is a telemetry metric
(every lane of it is checked; `{label=value}` narrows the lanes) or a windowed request
series (`ttft_p99_ms`, `achieved_rps`, `error_rps`, ...). A rule fires when the
condition holds on consecutive samples spanning at least `for_s`; a hole in the data
longer than three sample intervals ends a streak.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zerohop.analysis.timeseries import Lane

Operator = Literal[">", ">=", "<", "<="]

# Sensible defaults for any run; a caller's rules replace them.
DEFAULT_ALERT_RULES: tuple[str, ...] = (
    "gpu_temp_c > 85 for 30s",
    "kv_cache_usage_frac > 0.95 for 10s",
    "preemptions_per_s > 0 for 10s",
    "loadgen_cpu_pct > 90 for 10s",
)

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_DURATION = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RULE = re.compile(
    r"^\s*(?P<series>[A-Za-z_][A-Za-z0-9_:.]*)"
    r"(?:\{(?P<labels>[^}]*)\})?"
    r"\s*(?P<op>>=|<=|>|<)\s*"
    rf"(?P<number>{_NUMBER})(?P<si>[kKMGT]?)"
    rf"(?:\s+for\s+(?P<for_n>{_NUMBER})\s*(?P<for_unit>ms|min|s|m|h))?\s*$"
)


class AlertRuleError(ValueError):
    """A rule that cannot be parsed or validated; the message names the rule."""


class AlertRule(BaseModel):
    """One validated rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    series: str = Field(min_length=1, description="telemetry metric or window series name")
    op: Operator = Field(description="comparison applied as `value OP threshold`")
    threshold: float = Field(allow_inf_nan=False)
    for_s: float = Field(default=0.0, ge=0.0, description="how long it must hold")
    labels: dict[str, str] = Field(default_factory=dict, description="lane label filter")
    name: str | None = Field(default=None, description="shown instead of the rule text")

    @property
    def text(self) -> str:
        selector = ""
        if self.labels:
            selector = "{" + ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())) + "}"
        held = f" for {self.for_s:g}s" if self.for_s else ""
        return f"{self.series}{selector} {self.op} {self.threshold:g}{held}"


@dataclass(frozen=True)
class Firing:
    lane: str
    start_s: float  # seconds since the run's origin
    end_s: float
    duration_s: float
    peak: float  # the most extreme value during the episode


@dataclass(frozen=True)
class AlertResult:
    rule: AlertRule
    lanes_checked: int
    firings: list[Firing]

    @property
    def fired(self) -> bool:
        return bool(self.firings)


def parse_rule(text: str) -> AlertRule:
    """`series[{k=v,...}] OP number[k|M|G|T] [for N(ms|s|m|h)]` → AlertRule."""
    match = _RULE.match(text)
    if match is None:
        raise AlertRuleError(
            f"alert rule {text!r}: expected `SERIES OP NUMBER [for DURATION]`, "
            "e.g. `pcie_rx_bytes_per_s > 2.75e9 for 10s`"
        )
    labels: dict[str, str] = {}
    for part in (match["labels"] or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise AlertRuleError(f"alert rule {text!r}: label filter {part!r} is not key=value")
        labels[key.strip()] = value.strip().strip("\"'")
    for_s = 0.0
    if match["for_n"] is not None:
        for_s = float(match["for_n"]) * _DURATION[match["for_unit"]]
    return _validated(
        text,
        {
            "series": match["series"],
            "op": match["op"],
            "threshold": float(match["number"]) * _SI[match["si"]],
            "for_s": for_s,
            "labels": labels,
        },
    )


def load_rules(items: Iterable[str | Mapping[str, Any] | AlertRule]) -> list[AlertRule]:
    """Rules from strings, mappings or AlertRule objects, each validated."""
    rules = []
    for item in items:
        if isinstance(item, AlertRule):
            rules.append(item)
        elif isinstance(item, str):
            rules.append(parse_rule(item))
        elif isinstance(item, Mapping):
            rules.append(_validated(repr(dict(item)), dict(item)))
        else:
            raise AlertRuleError(f"alert rule {item!r}: expected a string or a mapping")
    return rules


def load_rules_file(path: Path) -> list[AlertRule]:
    """A YAML (or JSON) file: a list of rules, or a mapping with an `alerts` list."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise AlertRuleError(f"alert rules file {path}: {exc}".splitlines()[0]) from None
    if isinstance(data, Mapping) and set(data) == {"alerts"}:
        data = data["alerts"]
    if not isinstance(data, list):
        raise AlertRuleError(f"alert rules file {path}: expected a list of rules (or `alerts:`)")
    return load_rules(data)


def evaluate_rules(
    rules: Sequence[AlertRule],
    lanes: Sequence[Lane],
    window_series: Mapping[str, tuple[np.ndarray, np.ndarray]],
    t0: float,
) -> list[AlertResult]:
    """Evaluate each rule over the matching telemetry lanes (raw samples) or the
    named window series (`{name: (timestamps, values)}`)."""
    results = []
    for rule in rules:
        targets: list[tuple[str, np.ndarray, np.ndarray]] = [
            (lane.key, lane.ts, lane.values)
            for lane in lanes
            if lane.metric == rule.series
            and all(lane.labels.get(k) == v for k, v in rule.labels.items())
        ]
        if not targets and rule.series in window_series and not rule.labels:
            ts, values = window_series[rule.series]
            targets.append((rule.series, ts, values))
        firings = [
            firing
            for key, ts, values in targets
            for firing in sustained_episodes(rule, key, ts, values, t0)
        ]
        results.append(AlertResult(rule=rule, lanes_checked=len(targets), firings=firings))
    return results


def sustained_episodes(
    rule: AlertRule, key: str, ts: np.ndarray, values: np.ndarray, t0: float
) -> list[Firing]:
    """Streaks of consecutive samples meeting the condition for at least `for_s`.
    A streak's length counts the last sample's interval: one 100 ms sample = 0.1 s."""
    ts = np.asarray(ts, dtype=float)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(ts) & np.isfinite(values)
    ts, values = ts[keep], values[keep]
    if ts.size == 0:
        return []
    interval = float(np.median(np.diff(ts))) if ts.size > 1 else 0.0
    condition = _compare(values, rule.op, rule.threshold)
    # gap[i]: a hole in the data between sample i and i + 1 ends any streak there.
    gap = np.diff(ts) > 3.0 * max(interval, 1e-9)
    starts_here = np.ones(ts.size, dtype=bool)
    starts_here[1:] = ~condition[:-1] | gap
    ends_here = np.ones(ts.size, dtype=bool)
    ends_here[:-1] = ~condition[1:] | gap
    starts = np.flatnonzero(condition & starts_here)
    if starts.size == 0:
        return []
    stops = np.flatnonzero(condition & ends_here)
    durations = ts[stops] - ts[starts] + interval
    upward = rule.op in (">", ">=")
    masked = np.where(condition, values, -np.inf if upward else np.inf)
    peaks = (np.maximum if upward else np.minimum).reduceat(masked, starts)
    return [
        Firing(
            lane=key,
            start_s=float(ts[start] - t0),
            end_s=float(ts[stop] - t0 + interval),
            duration_s=float(duration),
            peak=float(peak),
        )
        for start, stop, duration, peak in zip(starts, stops, durations, peaks, strict=True)
        if duration + 1e-9 >= rule.for_s
    ]


def _compare(values: np.ndarray, op: str, threshold: float) -> np.ndarray:
    if op == ">":
        return values > threshold
    if op == ">=":
        return values >= threshold
    if op == "<":
        return values < threshold
    return values <= threshold


def _validated(text: str, fields: dict[str, Any]) -> AlertRule:
    try:
        return AlertRule.model_validate(fields)
    except ValidationError as exc:
        # An unknown key (a typo) explains the rest: report it first.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "rule"
        raise AlertRuleError(f"alert rule {text}: field {where!r}: {first['msg']}") from None
