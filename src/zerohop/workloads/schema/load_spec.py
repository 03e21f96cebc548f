"""The load sections of a workload: closed, open or trace-timed, with arrival
processes and rate shapes for open loads.

These are the declarations only; `arrivals.py` and `shapes.py` turn them into arrival
times.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from zerohop.workloads.schema.model_base import StrictModel, require_increasing, tag_shorthand

__all__ = [
    "AnyLoad",
    "Arrival",
    "ClosedLoad",
    "ClosedOrOpenLoad",
    "ConstantArrival",
    "GammaArrival",
    "OpenLoad",
    "PiecewisePoint",
    "PiecewiseShape",
    "PoissonArrival",
    "RampShape",
    "Shape",
    "SpikeShape",
    "StepPoint",
    "StepShape",
    "ThinkTime",
    "TraceLoad",
    "closed_by_default",
]


class PoissonArrival(StrictModel):
    """Exponential inter-arrival gaps (CV = 1): independent users."""

    type: Literal["poisson"] = Field(description="Arrival kind: Poisson.")


class GammaArrival(StrictModel):
    """Gamma inter-arrival gaps with a chosen coefficient of variation: CV > 1 is bursty,
    CV < 1 is more regular than Poisson."""

    type: Literal["gamma"] = Field(description="Arrival kind: gamma renewal process.")
    cv: float = Field(
        gt=0, le=20, description="Coefficient of variation of the gaps (1 = Poisson)."
    )


class ConstantArrival(StrictModel):
    """Evenly spaced arrivals (CV = 0)."""

    type: Literal["constant"] = Field(description="Arrival kind: fixed gaps of 1/rate.")


Arrival = Annotated[
    PoissonArrival | GammaArrival | ConstantArrival,
    Field(discriminator="type"),
    tag_shorthand("type"),
]


class RampShape(StrictModel):
    """The rate moves linearly from `from_multiplier` to `to_multiplier` × rate_rps."""

    type: Literal["ramp"] = Field(description="Shape kind: linear ramp.")
    from_multiplier: float = Field(default=0.0, ge=0, description="Multiplier before start_s.")
    to_multiplier: float = Field(
        default=1.0, ge=0, description="Multiplier from the ramp's end on."
    )
    start_s: float = Field(default=0.0, ge=0, description="When the ramp starts (s from start).")
    duration_s: float = Field(gt=0, description="How long the ramp takes (s).")


class StepPoint(StrictModel):
    """From `at_s` on, the rate is `multiplier` × rate_rps."""

    at_s: float = Field(ge=0, description="When this step begins (s from start).")
    multiplier: float = Field(ge=0, description="Multiplier of rate_rps from at_s on.")


class StepShape(StrictModel):
    """Piecewise constant multipliers: 1× until the first step."""

    type: Literal["step"] = Field(description="Shape kind: steps.")
    steps: list[StepPoint] = Field(min_length=1, description="Steps in increasing at_s.")

    @field_validator("steps")
    @classmethod
    def _increasing(cls, steps: list[StepPoint]) -> list[StepPoint]:
        require_increasing([s.at_s for s in steps], "steps")
        return steps


class SpikeShape(StrictModel):
    """1× rate, then `peak_multiplier` × rate for `duration_s` from `at_s`, then 1× again."""

    type: Literal["spike"] = Field(description="Shape kind: one spike.")
    peak_multiplier: float = Field(gt=0, description="Multiplier during the spike (e.g. 4).")
    at_s: float = Field(ge=0, description="When the spike starts (s from start).")
    duration_s: float = Field(gt=0, description="How long the spike lasts (s).")


class PiecewisePoint(StrictModel):
    """A knot of a piecewise-linear multiplier curve."""

    at_s: float = Field(ge=0, description="Time of the knot (s from start).")
    multiplier: float = Field(ge=0, description="Multiplier of rate_rps at that time.")


class PiecewiseShape(StrictModel):
    """Any curve: multipliers at knots, linearly interpolated, held after the last knot."""

    type: Literal["piecewise"] = Field(description="Shape kind: piecewise-linear knots.")
    points: list[PiecewisePoint] = Field(
        min_length=1, description="Knots in increasing at_s; before the first knot its value."
    )

    @field_validator("points")
    @classmethod
    def _increasing(cls, points: list[PiecewisePoint]) -> list[PiecewisePoint]:
        require_increasing([p.at_s for p in points], "points")
        return points


Shape = Annotated[
    RampShape | StepShape | SpikeShape | PiecewiseShape, Field(discriminator="type")
]


ThinkTime = Annotated[
    Literal["constant", "exponential"],
    Field(description="`constant`: exactly think_time_s; `exponential`: random with that mean."),
]
"""How a pause of mean `think_time_s` is drawn: a closed-loop user's between requests, a
conversation's between turns, an agent's between steps."""


class ClosedLoad(StrictModel):
    """Closed loop: a fixed number of users, each sending its next request when the
    previous one ends (plus think time). Concurrency is the knob; the rate follows."""

    kind: Literal["closed"] = Field(description="Load kind: closed loop (concurrency).")
    users: int = Field(
        default=1, gt=0,
        description="Concurrent users of this workload, over all load-generator processes "
        "(`zerohop run --users N` overrides: N users over all workloads by weight).",
    )
    think_time_s: float = Field(
        default=0.0, ge=0, description="Pause between a response's end and the next request (s)."
    )
    think_time: ThinkTime = "constant"


class OpenLoad(StrictModel):
    """Open loop: arrivals follow a clock, not the responses, so a slow server builds a
    queue instead of slowing the load (no coordinated omission)."""

    kind: Literal["open"] = Field(description="Load kind: open loop (arrival rate).")
    rate_rps: float = Field(gt=0, description="Total arrival rate over all workers (req/s).")
    arrival: Arrival = Field(
        default_factory=lambda: PoissonArrival(type="poisson"),
        description="Inter-arrival process: poisson | gamma (with cv) | constant.",
    )
    max_in_flight: int | None = Field(
        default=None,
        gt=0,
        description="Cap on requests in flight (all workers); arrivals over it are dropped "
        "and counted. None: no cap.",
    )
    shape: Shape | None = Field(
        default=None,
        description="Rate over time as multipliers of rate_rps: ramp | step | spike | "
        "piecewise. None: constant.",
    )


class TraceLoad(StrictModel):
    """Arrivals at the trace's own timestamps (scaled by `speed`)."""

    kind: Literal["trace"] = Field(description="Load kind: the trace's timestamps.")
    max_in_flight: int | None = Field(
        default=None,
        gt=0,
        description="Cap on requests in flight (all workers); arrivals over it are dropped "
        "and counted. None: no cap.",
    )


ClosedOrOpenLoad = Annotated[ClosedLoad | OpenLoad, Field(discriminator="kind")]
AnyLoad = Annotated[ClosedLoad | OpenLoad | TraceLoad, Field(discriminator="kind")]


def closed_by_default(users: int, description: str) -> Any:
    """A load field that runs `users` closed-loop users unless set."""
    return Field(default_factory=lambda: ClosedLoad(kind="closed", users=users),
                 description=description)
