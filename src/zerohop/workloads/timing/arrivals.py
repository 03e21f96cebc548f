"""Open-loop arrival processes: when requests are due, independent of the responses.

An arrival process is a renewal process of unit rate in "operational time" (Poisson:
exponential gaps; gamma: gaps with a chosen CV; constant: gaps of exactly 1) mapped onto
wall time through the inverse cumulative rate of a `PiecewiseLinearRate` (time
rescaling), so ramps, steps and spikes change the rate but not the burstiness.

Splitting across workers: every worker builds the SAME seeded schedule and keeps every
N-th arrival (worker i takes arrivals i, i+N, i+2N, ...). The union over the workers is
then exactly the requested process. The alternative, each worker running an independent
process at rate/N, is exact only for Poisson: the superposition of N independent gamma
processes drifts towards Poisson as N grows (bursts are averaged away), and a trace
cannot be split that way at all. The cost, every worker generating the whole schedule,
is a few microseconds per arrival.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from zerohop.workloads.schema.load_spec import (
    ConstantArrival,
    GammaArrival,
    OpenLoad,
    PoissonArrival,
)
from zerohop.workloads.timing.rate_curve import PiecewiseLinearRate, constant_rate, rate_shape_for

__all__ = [
    "ArrivalKind",
    "ArrivalSchedule",
    "arrival_offsets",
    "check_worker",
    "schedule_for_load",
    "split_count",
    "unit_gaps",
    "worker_share",
]

ArrivalKind = Literal["poisson", "gamma", "constant"]

T = TypeVar("T")

_CHUNK = 4096


@dataclass
class ArrivalSchedule:
    """A seeded, endless (or shape-limited) sequence of arrival offsets in seconds from
    the start. Iterating it twice gives the same offsets: the generator is re-created
    from the seed each time."""

    kind: ArrivalKind
    rate: PiecewiseLinearRate
    seed: int | tuple[int, ...]
    cv: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("poisson", "gamma", "constant"):
            raise ValueError(f"unknown arrival kind '{self.kind}' (poisson, gamma, constant)")
        if self.cv <= 0 and self.kind == "gamma":
            raise ValueError("gamma arrivals need cv > 0")

    def __iter__(self) -> Iterator[float]:
        rng = np.random.default_rng(np.random.SeedSequence(self.seed))
        consumed = 0.0  # operational time reached so far
        while True:
            gaps = unit_gaps(self.kind, _CHUNK, rng, cv=self.cv)
            if self.kind == "constant":
                # constant arrivals start at t = 0, then every 1/rate
                points = consumed + np.arange(_CHUNK, dtype=np.float64)
                consumed += float(_CHUNK)
            else:
                points = consumed + np.cumsum(gaps)
                consumed = float(points[-1])
            offsets = self.rate.inverse_cumulative(points)
            for offset in offsets.tolist():
                if offset == float("inf"):
                    return  # the rate dropped to 0 for good
                yield offset

    def offsets(self, duration_s: float, max_arrivals: int | None = None) -> np.ndarray:
        """All offsets in [0, duration_s) (at most max_arrivals)."""
        taken = itertools.takewhile(lambda t: t < duration_s, iter(self))
        return np.fromiter(itertools.islice(taken, max_arrivals), dtype=np.float64)


def schedule_for_load(load: OpenLoad, seed: int | tuple[int, ...]) -> ArrivalSchedule:
    """The schedule an `open` load section describes (total over all workers)."""
    rate = rate_shape_for(load.rate_rps, load.shape)
    arrival: Any = load.arrival
    if isinstance(arrival, GammaArrival):
        return ArrivalSchedule("gamma", rate, seed, cv=arrival.cv)
    if isinstance(arrival, ConstantArrival):
        return ArrivalSchedule("constant", rate, seed, cv=0.0)
    if isinstance(arrival, PoissonArrival):
        return ArrivalSchedule("poisson", rate, seed)
    raise TypeError(f"unknown arrival {type(arrival).__name__}")


def arrival_offsets(
    kind: ArrivalKind,
    rate_rps: float | PiecewiseLinearRate,
    duration_s: float,
    *,
    seed: int | tuple[int, ...],
    cv: float = 1.0,
) -> np.ndarray:
    """Offsets (s) of one seeded process over [0, duration_s): the one-call form."""
    rate = rate_rps if isinstance(rate_rps, PiecewiseLinearRate) else constant_rate(rate_rps)
    return ArrivalSchedule(kind, rate, seed, cv=cv).offsets(duration_s)


def unit_gaps(
    kind: ArrivalKind, n: int, rng: np.random.Generator, *, cv: float = 1.0
) -> np.ndarray:
    """n inter-arrival gaps with mean 1 (scale by 1/rate for a flat rate).

    Gamma with shape k = 1/cv² and scale cv² has mean 1 and CV cv; cv = 1 is Poisson."""
    if kind == "poisson":
        return rng.exponential(1.0, size=n)
    if kind == "gamma":
        shape = 1.0 / (cv * cv)
        return rng.gamma(shape, 1.0 / shape, size=n)
    if kind == "constant":
        return np.ones(n, dtype=np.float64)
    raise ValueError(f"unknown arrival kind '{kind}' (poisson, gamma, constant)")


def worker_share(items: Iterable[T], worker_index: int, worker_count: int) -> Iterator[T]:
    """Worker i's share of a shared sequence: items i, i+N, i+2N, ..."""
    check_worker(worker_index, worker_count)
    return itertools.islice(items, worker_index, None, worker_count)


def split_count(total: int, worker_index: int, worker_count: int) -> int:
    """Worker i's share of an integer total (users, an in-flight cap): the first
    total % N workers get one more, so the shares add up to the total exactly."""
    check_worker(worker_index, worker_count)
    base, extra = divmod(total, worker_count)
    return base + (1 if worker_index < extra else 0)


def check_worker(worker_index: int, worker_count: int) -> None:
    """Refuse a worker index outside 0..worker_count-1."""
    if worker_count < 1 or not 0 <= worker_index < worker_count:
        raise ValueError(f"worker_index {worker_index} outside 0..{worker_count - 1}")
