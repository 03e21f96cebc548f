"""The live saturation verdict of a running `zerohop run`: the load generators' feed
lines (`loadgen/saturation_feed.py`, one a second from each process) summed into one
observation a refresh and given to the detector (`analysis/server/saturation.py`). The
console's progress line (`runner/progress.py`) and the web UI's zerohop tab
(`loadgen/web_tab.py`) each keep one and show its words.

Counts are summed over the processes; the oldest waits are the oldest of any; the
second's medians are the median of the processes' medians (an approximation with more
than one process, used only for the floors). Times are from the first line seen.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from zerohop.analysis.server.saturation import Observation, SaturationDetector, Verdict
from zerohop.core.layout import LIVE_DIR
from zerohop.report.present_saturation import SIGNAL_WORDS

_SUMMED = ("offered", "completed", "answered", "dropped")


class SaturationWatch:
    """Reads the feed's new lines at each `poll`; `verdict` is the run's so far."""

    def __init__(self, run_dir: Path) -> None:
        self.live_dir = run_dir / LIVE_DIR
        self.offsets: dict[Path, int] = {}
        self.latest: dict[Path, dict[str, Any]] = {}
        self.detector = SaturationDetector()
        self.first_ts: float | None = None
        self.elapsed_s = 0.0

    @property
    def verdict(self) -> Verdict:
        return self.detector.verdict

    def skip_written(self) -> None:
        """Start after the lines already in the feed (a web UI's earlier test wrote them)."""
        for path in self.live_dir.glob("*.jsonl"):
            self.offsets[path] = path.stat().st_size

    def poll(self) -> Verdict:
        fresh = False
        for path in sorted(self.live_dir.glob("*.jsonl")):
            line = self._last_new_line(path)
            if line is not None:
                self.latest[path], fresh = line, True
        if fresh:
            self.detector.observe(self._observation())
        return self.detector.verdict

    def status(self) -> str:
        """The progress line's words: empty until a feed line came."""
        if not self.latest:
            return ""
        verdict = self.detector.verdict
        if not verdict.saturated:
            return "  keeping up"
        signal = SIGNAL_WORDS.get(str(verdict.signal), str(verdict.signal))
        return f"  SATURATED since {verdict.since_s:.0f} s ({signal})"

    def _last_new_line(self, path: Path) -> dict[str, Any] | None:
        with open(path, "rb") as fh:
            fh.seek(self.offsets.get(path, 0))
            data = fh.read()
        end = data.rfind(b"\n") + 1  # whole lines only
        if end == 0:
            return None
        self.offsets[path] = self.offsets.get(path, 0) + end
        try:
            row = json.loads(data[:end].rsplit(b"\n", 2)[-2])
        except ValueError:
            return None
        return row if isinstance(row, dict) else None

    def _observation(self) -> Observation:
        rows = list(self.latest.values())
        ts = max(float(row["ts"]) for row in rows)
        if self.first_ts is None:
            self.first_ts = min(float(row["ts"]) for row in rows)
        self.elapsed_s = ts - self.first_ts
        total = {key: sum(int(row.get(key) or 0) for row in rows) for key in _SUMMED}
        return Observation(
            t_s=self.elapsed_s, offered=total["offered"], completed=total["completed"],
            answered=total["answered"], dropped=total["dropped"],
            oldest_wait_s=_largest(rows, "oldest_wait_s"),
            first_token_s=_median(rows, "first_token_s"),
            oldest_in_flight_s=_largest(rows, "oldest_in_flight_s"),
            e2e_s=_median(rows, "e2e_s"))


def _largest(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [float(row[key]) for row in rows if row.get(key) is not None]
    return max(values) if values else None


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [float(row[key]) for row in rows if row.get(key) is not None]
    return statistics.median(values) if values else None
