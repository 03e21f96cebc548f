"""Rate shapes: arrival rate over time as a piecewise-linear curve (jumps allowed).

Every shape the specs offer (constant, ramp, step, spike, piecewise) is one
`PiecewiseLinearRate`, because that is the class whose cumulative rate Λ(t) has a
closed-form inverse: arrivals are made by time rescaling (a unit-rate process in
"operational time" u, mapped to t = Λ⁻¹(u)), which is exact and, unlike thinning, keeps
the burstiness (CV) of a gamma process at every rate level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from zerohop.workloads.schema.load_spec import PiecewiseShape, RampShape, SpikeShape, StepShape

__all__ = [
    "PiecewiseLinearRate",
    "constant_rate",
    "piecewise_rate",
    "ramp_rate",
    "rate_shape_for",
    "spike_rate",
    "step_rate",
]


def rate_shape_for(rate_rps: float, shape: Any | None) -> PiecewiseLinearRate:
    """The rate curve of an open load: `rate_rps` times the spec's shape (None: flat)."""
    if shape is None:
        return constant_rate(rate_rps)
    builder = _BUILDERS.get(type(shape))
    if builder is None:
        raise TypeError(f"unknown rate shape {type(shape).__name__} (have: {_builder_names()})")
    return builder(rate_rps, shape)


@dataclass(frozen=True)
class PiecewiseLinearRate:
    """Rate (req/s) linear between knots, held after the last knot; a repeated knot time
    is a jump. Knot times start at 0 and never decrease."""

    times_s: np.ndarray
    rates_rps: np.ndarray
    _cum_at_knots: np.ndarray = field(init=False, repr=False, compare=False)
    _slopes: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        times = np.asarray(self.times_s, dtype=np.float64)
        rates = np.asarray(self.rates_rps, dtype=np.float64)
        if times.ndim != 1 or times.shape != rates.shape or times.size == 0:
            raise ValueError("times_s and rates_rps must be equal-length, non-empty 1-D arrays")
        if times[0] != 0.0 or np.any(np.diff(times) < 0):
            raise ValueError("knot times must start at 0 and never decrease")
        if np.any(rates < 0) or not np.all(np.isfinite(rates)):
            raise ValueError("rates must be finite and >= 0")
        object.__setattr__(self, "times_s", times)
        object.__setattr__(self, "rates_rps", rates)
        durations = np.diff(times)
        areas = (rates[:-1] + rates[1:]) / 2.0 * durations
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # knots closer than a picosecond are a jump, not a (near-infinite) slope
            slopes = np.where(durations > 1e-12, np.diff(rates) / durations, 0.0)
        object.__setattr__(self, "_cum_at_knots", np.concatenate(([0.0], np.cumsum(areas))))
        object.__setattr__(self, "_slopes", np.append(slopes, 0.0))  # the tail is flat

    def rate_at(self, t_s: npt.ArrayLike) -> np.ndarray:
        """Rate at the given times (right-continuous at jumps)."""
        t = np.asarray(t_s, dtype=np.float64)
        idx = np.clip(np.searchsorted(self.times_s, t, side="right") - 1, 0, None)
        return np.asarray(self._segment_rate(idx, t))

    def cumulative(self, t_s: npt.ArrayLike) -> np.ndarray:
        """Λ(t): expected arrivals in [0, t]."""
        t = np.clip(np.asarray(t_s, dtype=np.float64), 0.0, None)
        idx = np.clip(np.searchsorted(self.times_s, t, side="right") - 1, 0, None)
        tau = t - self.times_s[idx]
        start_rate = self.rates_rps[idx]
        slope = self._slopes[idx]
        cum: np.ndarray = self._cum_at_knots[idx] + start_rate * tau + 0.5 * slope * tau * tau
        return cum

    def inverse_cumulative(self, u: npt.ArrayLike) -> np.ndarray:
        """Λ⁻¹(u): the time by which u arrivals are expected; inf where the rate has
        dropped to 0 for good before u is reached."""
        u = np.asarray(u, dtype=np.float64)
        cum = self._cum_at_knots
        idx = np.clip(np.searchsorted(cum, u, side="right") - 1, 0, None)
        du = u - cum[idx]
        start_rate = self.rates_rps[idx]
        slope = self._slopes[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            root = np.sqrt(np.maximum(start_rate * start_rate + 2.0 * slope * du, 0.0))
            tau = np.where(du > 0, 2.0 * du / (start_rate + root), 0.0)
        last = idx == self.times_s.size - 1
        seg_len = np.append(np.diff(self.times_s), np.inf)[idx]
        tau = np.where(last, tau, np.minimum(tau, seg_len))
        # past the last knot at rate 0 nothing more arrives (not even at the knot itself)
        tau = np.where(last & (self.rates_rps[-1] == 0.0), np.inf, tau)
        t: np.ndarray = self.times_s[idx] + np.where(np.isnan(tau), np.inf, tau)
        return t

    def expected_arrivals(self, start_s: float, end_s: float) -> float:
        return float(self.cumulative(end_s) - self.cumulative(start_s))

    def _segment_rate(self, idx: np.ndarray, t: np.ndarray) -> np.ndarray:
        rate: np.ndarray = self.rates_rps[idx] + self._slopes[idx] * (t - self.times_s[idx])
        return rate


# --- constructors ----------------------------------------------------------------------------
def constant_rate(rate_rps: float) -> PiecewiseLinearRate:
    return PiecewiseLinearRate(np.array([0.0]), np.array([float(rate_rps)]))


def ramp_rate(
    base_rps: float,
    *,
    from_multiplier: float,
    to_multiplier: float,
    duration_s: float,
    start_s: float = 0.0,
) -> PiecewiseLinearRate:
    """from × base until start_s, linear to to × base over duration_s, then held."""
    low, high = base_rps * from_multiplier, base_rps * to_multiplier
    return _knots([(0.0, low), (start_s, low), (start_s + duration_s, high)])


def step_rate(base_rps: float, steps: Sequence[tuple[float, float]]) -> PiecewiseLinearRate:
    """1× base until the first (at_s, multiplier), then each multiplier from its at_s on."""
    knots: list[tuple[float, float]] = [(0.0, base_rps)]
    level = base_rps
    for at_s, multiplier in steps:
        knots += [(at_s, level), (at_s, base_rps * multiplier)]
        level = base_rps * multiplier
    return _knots(knots)


def spike_rate(
    base_rps: float, *, peak_multiplier: float, at_s: float, duration_s: float
) -> PiecewiseLinearRate:
    """1× base, peak × base in [at_s, at_s + duration_s), then 1× again."""
    return step_rate(base_rps, [(at_s, peak_multiplier), (at_s + duration_s, 1.0)])


def piecewise_rate(base_rps: float, points: Sequence[tuple[float, float]]) -> PiecewiseLinearRate:
    """Multipliers at knots, linear between, the first held before it, the last after."""
    first_multiplier = points[0][1]
    knots = [(0.0, base_rps * first_multiplier)]
    knots += [(at_s, base_rps * multiplier) for at_s, multiplier in points]
    return _knots(knots)


def _knots(knots: Sequence[tuple[float, float]]) -> PiecewiseLinearRate:
    times = np.array([t for t, _ in knots], dtype=np.float64)
    rates = np.array([r for _, r in knots], dtype=np.float64)
    return PiecewiseLinearRate(times, rates)


_BUILDERS: Mapping[type, Callable[[float, Any], PiecewiseLinearRate]] = MappingProxyType(
    {
        RampShape: lambda rate, s: ramp_rate(
            rate,
            from_multiplier=s.from_multiplier,
            to_multiplier=s.to_multiplier,
            duration_s=s.duration_s,
            start_s=s.start_s,
        ),
        StepShape: lambda rate, s: step_rate(rate, [(p.at_s, p.multiplier) for p in s.steps]),
        SpikeShape: lambda rate, s: spike_rate(
            rate, peak_multiplier=s.peak_multiplier, at_s=s.at_s, duration_s=s.duration_s
        ),
        PiecewiseShape: lambda rate, s: piecewise_rate(
            rate, [(p.at_s, p.multiplier) for p in s.points]
        ),
    }
)


def _builder_names() -> str:
    return ", ".join(cls.__name__ for cls in _BUILDERS)
