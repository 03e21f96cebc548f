"""What one run is asked to do: the plan the CLI builds from its flags and the planners
build from their own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerohop.workloads.kinds import KIND_CLASS_NAMES

CLASS_NAMES = tuple(KIND_CLASS_NAMES.values())


@dataclass
class RunPlan:
    host: str | None
    api: str
    workloads: list[Path]
    classes: list[str]
    users: int
    rate: float | None
    duration_s: float
    telemetry: str
    slo: dict[str, float]
    name: str
    workers: int
    results_dir: Path
    seed: int
    sim_args: list[str] = field(default_factory=list)
    model: str = ""
    report: bool = True
    microbench: str = "auto"
    # an interleaved comparison: {arm: base URL}; each request goes to one, at random
    arm_hosts: dict[str, str] = field(default_factory=dict)
    # Locust plugin files loaded beside the shipped user classes (their own event hooks)
    locustfiles: list[Path] = field(default_factory=list)


def parse_duration(text: str) -> float:
    """`90`, `90s`, `2m`, `1h30m` → seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"--duration: {text!r} is not like 30s, 2m or 1h30m")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


def classes_for(specs: list[Any]) -> list[str]:
    """The user classes that run the given workload specs: naming workload files runs
    those workloads, not every shipped one beside them."""
    return list(dict.fromkeys(KIND_CLASS_NAMES[spec.kind] for spec in specs))
