"""GuideLLM's over-saturation stop as published (`--stop-over-saturated`), written again
here to be measured beside zerohop's detector; never shipped.

The rule (guidellm `scheduler/constraints/over_saturation.py`, defaults): every request
start adds (time, requests in flight) to one linear fit, every finished request with a
first token adds (time, TTFT) to another; each fit keeps at most the last 120 s and 75 %
of all its points. After 30 s, once at least half of the fitted TTFTs exceed 2.5 s
(none at all passes: its issue 606) and the in-flight fit has 5 points, it alarms when
each fit's slope is positive with a 95 % margin of error under twice the slope (effective
n: the points, at most the seconds elapsed). With fewer than 5 TTFTs, the in-flight fit
alone decides. The check runs at every start and end.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

MIN_DURATION_S = 30.0
MIN_TTFT_S = 2.5
MAX_WINDOW_S = 120.0
MAX_WINDOW_RATIO = 0.75
MIN_WINDOW_SIZE = 5
MOE_THRESHOLD = 2.0
CONFIDENCE = 0.95


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile: the normal quantile (Abramowitz & Stegun 26.2.23) with the
    first two Cornish-Fisher terms, the approximation the rule uses."""
    if dof <= 0:
        return math.nan
    q = p if p < 0.5 else 1.0 - p
    t = math.sqrt(-2.0 * math.log(q))
    z = t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (
        1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t ** 3)
    z = z if p >= 0.5 else -z
    g1 = (z ** 3 + z) / 4.0
    g2 = (5 * z ** 4 + 16 * z ** 3 + 3 * z ** 2) / 96.0
    return z + g1 / dof + g2 / dof ** 2


@dataclass
class RunningFit:
    """A least-squares line over a sliding set of points, by running sums."""

    points: deque[tuple[float, float]] = field(default_factory=deque)
    total_ever: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxy: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0

    def add(self, x: float, y: float) -> None:
        self.points.append((x, y))
        self.total_ever += 1
        self._sum(x, y, 1.0)

    def drop_oldest(self) -> tuple[float, float]:
        x, y = self.points.popleft()
        self._sum(x, y, -1.0)
        return x, y

    def _sum(self, x: float, y: float, sign: float) -> None:
        self.sx += sign * x
        self.sy += sign * y
        self.sxy += sign * x * y
        self.sxx += sign * x * x
        self.syy += sign * y * y

    def trim(self, now: float) -> list[tuple[float, float]]:
        dropped = []
        while len(self.points) > int(self.total_ever * MAX_WINDOW_RATIO):
            dropped.append(self.drop_oldest())
        while self.points and now - self.points[0][0] > MAX_WINDOW_S:
            dropped.append(self.drop_oldest())
        return dropped

    def rising(self, effective_n: float) -> bool:
        if effective_n < 3:
            return False
        n = len(self.points)
        cxx = max(self.sxx - self.sx ** 2 / n, 1e-12)
        cxy = self.sxy - self.sx * self.sy / n
        cyy = self.syy - self.sy ** 2 / n
        slope = cxy / cxx
        rss = max(cyy - cxy ** 2 / cxx, 0.0)
        dof = effective_n - 2
        se = math.sqrt(rss / dof / cxx)
        moe = t_quantile(1 - (1 - CONFIDENCE) / 2, dof) * se / max(slope, 1e-12)
        return slope > 0 and moe < MOE_THRESHOLD


class GuideLLMRule:
    """Feed it starts and ends in time order; `alarm_s` is when it first stopped."""

    def __init__(self) -> None:
        self.in_flight = RunningFit()
        self.ttft = RunningFit()
        self.violations = 0
        self.alarm_s: float | None = None

    def started(self, t_s: float, in_flight: int) -> None:
        self.in_flight.add(t_s, float(in_flight))
        self._check(t_s)

    def finished(self, t_s: float, ttft_s: float | None) -> None:
        if ttft_s is not None:
            self.ttft.add(t_s, ttft_s)
            self.violations += ttft_s > MIN_TTFT_S
        self._check(t_s)

    def _check(self, now: float) -> None:
        self.in_flight.trim(now)
        for _, ttft in self.ttft.trim(now):
            self.violations -= ttft > MIN_TTFT_S
        if self.alarm_s is None and self._alert(now):
            self.alarm_s = now

    def _alert(self, now: float) -> bool:
        n_flight = min(now, len(self.in_flight.points))
        n_ttft = min(now, len(self.ttft.points))
        if (now < MIN_DURATION_S or len(self.ttft.points) > 2 * self.violations
                or n_flight < MIN_WINDOW_SIZE):
            return False
        flight_rising = self.in_flight.rising(n_flight)
        if n_ttft < MIN_WINDOW_SIZE:
            return flight_rising
        return flight_rising and self.ttft.rising(n_ttft)
