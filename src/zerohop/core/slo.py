"""The one SLO grammar: what `--slo`, a run's manifest and a workload's `slo` block say.

An objective is `KEY=VALUE` on the command line (several joined by commas) or
`KEY: VALUE` in a mapping:

    KEY   = <metric>_<statistic>_ms | <metric>_ms
    VALUE = a positive number of milliseconds

- `<metric>` is a latency the catalogue marks usable in an SLO (`core.metrics`):
  ttft, tpot, itl, e2e, ttft_from_schedule, e2e_from_schedule.
- `<statistic>` is `p<percentile>` — `p99`, `p50`, `p99.9`, also written `p99_9` or
  `p999` (two digits, then decimals: `p995` is p99.5; `p100` is `max`) — or `mean` or
  `max`.
- `<metric>_ms` alone (`ttft_ms=500`) means every request: it is `<metric>_max_ms`.

`ttft_p99_ms=500` judges the run (its p99 TTFT over ok requests must be ≤ 500 ms) and
sets the per-request threshold goodput counts against (an ok request is good when its
own TTFT is ≤ 500 ms). A request without the value — no TPOT for a one-token answer —
passes that objective; for ITL a request's largest gap must meet it. The same
(metric, statistic) twice, however spelled, is an error.

Bad text raises `SloError` (a ValueError) whose message is one line naming the bad
part. Evaluation against records lives in `analysis.slo`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zerohop.core.metrics import METRICS, SLO_METRICS

# Longest first, so `ttft_from_schedule_p99_ms` is never read as `ttft` + `from_...`.
_STEMS: tuple[str, ...] = tuple(
    sorted((METRICS[name].stem for name in SLO_METRICS), key=len, reverse=True)
)
_PERCENTILE = re.compile(r"^p(?P<whole>\d+)(?:[._](?P<decimals>\d+))?$")
_KEY_SHAPE = "ttft_p99_ms / tpot_mean_ms / e2e_ms"
_STATISTICS = "p<percentile> such as p99 or p99.9, mean or max"


class SloError(ValueError):
    """SLO text that is not in the grammar; the message is one line for the user."""


@dataclass(frozen=True)
class SloTarget:
    """One objective: `key` as written, the request column it judges, the statistic
    (`p99`, `p99.9`, `mean` or `max`) and the threshold."""

    key: str
    column: str  # request column, e.g. "ttft_ms"
    statistic: str
    threshold_ms: float


def metric_names() -> str:
    """The metrics an SLO may name, as a message lists them."""
    return ", ".join(METRICS[name].stem for name in SLO_METRICS)


def parse_key(key: str, where: str = "SLO") -> tuple[str, str]:
    """`ttft_p999_ms` → ("ttft_ms", "p99.9"); `e2e_ms` → ("e2e_ms", "max")."""
    body = key.removesuffix("_ms")
    if not key.endswith("_ms") or not body:
        raise SloError(f"{where}: {key!r} is not like {_KEY_SHAPE}")
    stem = next((s for s in _STEMS if body == s or body.startswith(s + "_")), None)
    if stem is None:
        guess = body.rsplit("_", 1)[0] if "_" in body else body
        raise SloError(f"{where}: {key!r}: unknown metric {guess!r} ({metric_names()})")
    if body == stem:
        return f"{stem}_ms", "max"
    return f"{stem}_ms", _statistic(body[len(stem) + 1:], key, where)


def parse_target(key: str, value: object, where: str = "SLO") -> SloTarget:
    """One objective from its key and threshold (a number, or the text of one)."""
    key = key.strip()
    column, statistic = parse_key(key, where)
    return SloTarget(key, column, statistic, _threshold(key, value, where))


def parse_slo_text(text: str, where: str = "--slo") -> list[SloTarget]:
    """`ttft_p99_ms=500,tpot_p99_ms=50` → its targets, in order (empty text: none)."""
    targets: list[SloTarget] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise SloError(f"{where}: {part!r} is not NAME=VALUE (e.g. ttft_p99_ms=500)")
        add_target(targets, parse_target(key, value, where), where)
    return targets


def parse_slo_mapping(slo: Mapping[Any, Any] | None, where: str = "slo") -> list[SloTarget]:
    """The targets of a `{key: threshold}` mapping (a workload's `slo` block)."""
    targets: list[SloTarget] = []
    for key, value in (slo or {}).items():
        add_target(targets, parse_target(str(key), value, where), where)
    return targets


def add_target(targets: list[SloTarget], target: SloTarget, where: str = "SLO") -> None:
    """Append `target`, refusing a second objective on the same metric and statistic."""
    for other in targets:
        if (other.column, other.statistic) == (target.column, target.statistic):
            raise SloError(
                f"{where}: {target.key!r} repeats {other.key!r} (both {target.statistic} "
                f"of {target.column})"
            )
    targets.append(target)


def slo_text(targets: Iterable[SloTarget]) -> str:
    """The `--slo` text that parses back to `targets`."""
    return ",".join(f"{t.key}={t.threshold_ms:g}" for t in targets)


def request_meets(targets: Iterable[SloTarget], values: Mapping[str, float | None]) -> bool:
    """True when one ok request meets every target's threshold. `values` maps request
    columns to the request's value (for `itl_ms`, its largest gap); a missing value
    (None, NaN or absent) passes."""
    for target in targets:
        value = values.get(target.column)
        if value is not None and not math.isnan(value) and value > target.threshold_ms:
            return False
    return True


def _statistic(stat: str, key: str, where: str) -> str:
    if stat in ("mean", "max"):
        return stat
    match = _PERCENTILE.match(stat)
    if match is None:
        raise SloError(f"{where}: {key!r}: unknown statistic {stat!r} ({_STATISTICS})")
    whole, decimals = match["whole"], match["decimals"]
    if decimals is None and len(whole) > 2 and int(whole) != 100:
        whole, decimals = whole[:2], whole[2:]  # p999 → p99.9
    q = float(f"{whole}.{decimals}" if decimals else whole)
    if not 0 < q <= 100:
        raise SloError(f"{where}: {key!r}: percentile {q:g} is not in (0, 100]")
    return "max" if q == 100 else f"p{q:.10g}"


def _threshold(key: str, value: object, where: str) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise SloError(f"{where}: {key}={value!r} is not a number of ms") from None
    if number is None:
        raise SloError(f"{where}: {key}={value!r} is not a number of ms")
    if not (math.isfinite(number) and number > 0):
        raise SloError(f"{where}: {key} must be a positive number of ms (got {str(value).strip()})")
    return number
