"""Brief legend names for a chart's telemetry series; the full names go on hover.

A DCGM lane is keyed `gpu_sm_util_pct{Hostname=node-a,UUID=GPU-5f3…,device=nvidia0,gpu=0,
modelName=NVIDIA H200}`: printed whole, five such keys make a legend nobody reads. Within
one chart only the labels that differ between its series tell them apart, and of those
the fewest that do, in order of how a person names a GPU (its index first, the UUID
last), so a legend reads `GPU 0 · GPU 1`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Labels in the order a reader would name a series by; any other label comes after
# these (alphabetically) and before the opaque identifiers at the end.
PREFERRED_LABELS: tuple[str, ...] = (
    "gpu", "model_name", "modelName", "engine", "instance", "Hostname", "hostname", "source",
)
OPAQUE_LABELS: tuple[str, ...] = ("device", "pci_bus_id", "UUID", "uuid")
MAX_VALUE_CHARS = 24


@dataclass(frozen=True)
class SeriesName:
    """What the legend shows and what hovering it shows."""

    brief: str
    full: str


def brief_names(
    series: Sequence[tuple[str, Mapping[str, str]]], prefix: Sequence[str] | None = None
) -> list[SeriesName]:
    """`series` = (full name, labels) per series of one chart; `prefix` an optional
    short word per series (`RX`, `waiting`) put before its distinguishing labels."""
    prefixes = list(prefix) if prefix is not None else [""] * len(series)
    keys = _distinguishing([labels for _, labels in series], prefixes)
    names = []
    for (full, labels), word in zip(series, prefixes, strict=True):
        parts = [_label_text(key, labels[key]) for key in keys if key in labels]
        brief = " ".join(p for p in (word, *parts) if p) or word or _bare_metric(full)
        names.append(SeriesName(brief=brief, full=full))
    return names


def _distinguishing(label_sets: Sequence[Mapping[str, str]], prefixes: Sequence[str]) -> list[str]:
    """The fewest labels, in reading order, that (with the prefixes) tell every series
    apart; every varying label when even all of them do not."""
    varying = [
        key
        for key in _reading_order({k for labels in label_sets for k in labels})
        if len({labels.get(key) for labels in label_sets}) > 1
    ]
    chosen: list[str] = []
    for key in varying:
        if _unique(label_sets, prefixes, chosen):
            break
        chosen.append(key)
    if not chosen and label_sets and all("gpu" in labels for labels in label_sets):
        chosen.append("gpu")  # one GPU is still named by its index
    return chosen


def _unique(
    label_sets: Sequence[Mapping[str, str]], prefixes: Sequence[str], keys: Sequence[str]
) -> bool:
    seen = {
        (prefix, *(labels.get(k) for k in keys))
        for labels, prefix in zip(label_sets, prefixes, strict=True)
    }
    return len(seen) == len(label_sets)


def _reading_order(keys: set[str]) -> list[str]:
    first = [k for k in PREFERRED_LABELS if k in keys]
    last = [k for k in OPAQUE_LABELS if k in keys]
    middle = sorted(keys - set(first) - set(last))
    return first + middle + last


def _label_text(key: str, value: str) -> str:
    if key == "gpu":
        return f"GPU {value}"
    if len(value) > MAX_VALUE_CHARS:
        value = value[: MAX_VALUE_CHARS - 1] + "…"
    return value if key in PREFERRED_LABELS else f"{key}={value}"


def _bare_metric(full: str) -> str:
    return full.split("{", 1)[0]
