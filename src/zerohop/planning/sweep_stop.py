"""`zerohop sweep --stop-when-saturated`: each point's run ends its load on the live
saturation verdict (`runner/saturation_watch.py`), and the sweep stops at the first
point found saturated, naming the points it skipped and the time that saved."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerohop.core.layout import SUMMARY_FILE
from zerohop.report.present_saturation import SIGNAL_WORDS


@dataclass(frozen=True)
class EarlyStop:
    """Where a sweep stopped: the saturated point, the loads it did not run, and the
    load seconds that saved (the skipped points' durations, and the part of the
    saturated point's own load that its early stop cut)."""

    load: float
    skipped: list[float] = field(default_factory=list)
    saved_s: float = 0.0

    def line(self, mode: str) -> str:
        skipped = ", ".join(f"{load:g}" for load in self.skipped) or "none"
        return (f"zerohop sweep: stopped at the first saturated point ({mode} "
                f"{self.load:g}); skipped {skipped}; {self.saved_s:.0f} s of load saved")


def point_saturation(run_dir: Path) -> dict[str, Any] | None:
    """The point's saturation block (its summary.json's), or None without one."""
    try:
        document = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return None
    block = document.get("saturation") if isinstance(document, dict) else None
    return block if isinstance(block, dict) else None


def verdict_reason(block: dict[str, Any] | None) -> str | None:
    """The sweep's reason for a point the detector found saturated, or None."""
    if not block or not block.get("saturated"):
        return None
    signal = SIGNAL_WORDS.get(str(block.get("signal")), str(block.get("signal")))
    return f"saturated since {block.get('since_s', 0):.0f} s of its load ({signal})"


def early_stop(load: float, block: dict[str, Any] | None, remaining: list[float],
               duration_s: float) -> EarlyStop:
    live = (block or {}).get("live")
    cut = 0.0
    if isinstance(live, dict):
        cut = max(0.0, float(live.get("planned_s", 0.0)) - float(live.get("stopped_at_s", 0.0)))
    return EarlyStop(load, list(remaining), cut + duration_s * len(remaining))
