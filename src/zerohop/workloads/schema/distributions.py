"""Token-count distributions: how long prompts and outputs are.

A workload field such as `input_tokens` takes one of these (discriminated on `type`),
or a bare integer for `fixed`. Draws are integers, clipped to the distribution's
bounds, from the caller's seeded generator.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Field, model_validator

from zerohop.workloads.schema.model_base import StrictModel

__all__ = [
    "Distribution",
    "DistributionBase",
    "FixedDist",
    "LognormalDist",
    "NormalDist",
    "UniformDist",
    "fixed_by_default",
    "uniform_by_default",
]


def _fixed_shorthand(value: Any) -> Any:
    """Let YAML say `max_tokens: 64` for `max_tokens: {type: fixed, value: 64}`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"type": "fixed", "value": value}
    return value


class DistributionBase(StrictModel):
    """What every distribution offers: its bounds and seeded integer draws."""

    def bounds(self) -> tuple[int, int | None]:
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` integer draws (int64), clipped to the distribution's bounds."""
        raise NotImplementedError

    def sample_one(self, rng: np.random.Generator) -> int:
        return int(self.sample(rng, 1)[0])


class FixedDist(DistributionBase):
    """Always the same count."""

    type: Literal["fixed"] = Field(description="Distribution kind: always `value`.")
    value: int = Field(gt=0, description="The token count.")

    def bounds(self) -> tuple[int, int | None]:
        return self.value, self.value

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.full(size, self.value, dtype=np.int64)

    def sample_one(self, rng: np.random.Generator) -> int:
        return self.value  # no array for one draw: this runs per request


class UniformDist(DistributionBase):
    """Integers uniformly between min and max, both included."""

    type: Literal["uniform"] = Field(description="Distribution kind: uniform integers.")
    min: int = Field(gt=0, description="Smallest count (included).")
    max: int = Field(gt=0, description="Largest count (included).")

    @model_validator(mode="after")
    def _ordered(self) -> UniformDist:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def bounds(self) -> tuple[int, int | None]:
        return self.min, self.max

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.integers(self.min, self.max + 1, size=size, dtype=np.int64)


class _BoundedDist(DistributionBase):
    min: int = Field(default=1, gt=0, description="Draws below this are raised to it.")
    max: int | None = Field(
        default=None, gt=0, description="Draws above this are lowered to it (none: unbounded)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> _BoundedDist:
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def bounds(self) -> tuple[int, int | None]:
        return self.min, self.max

    def _clip(self, draws: np.ndarray) -> np.ndarray:
        upper = self.max if self.max is not None else np.iinfo(np.int64).max // 2
        return np.clip(np.rint(draws), self.min, upper).astype(np.int64)


class NormalDist(_BoundedDist):
    """Normal in token counts, rounded and clipped to [min, max]."""

    type: Literal["normal"] = Field(description="Distribution kind: normal, clipped.")
    mean: float = Field(gt=0, description="Mean token count.")
    std: float = Field(ge=0, description="Standard deviation in tokens.")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self._clip(rng.normal(self.mean, self.std, size=size))


class LognormalDist(_BoundedDist):
    """Log-normal (long right tail, like real prompt lengths), rounded and clipped."""

    type: Literal["lognormal"] = Field(description="Distribution kind: log-normal, clipped.")
    median: float = Field(gt=0, description="Median token count (exp of the log-mean).")
    sigma: float = Field(ge=0, description="Standard deviation of the natural log of the count.")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self._clip(rng.lognormal(float(np.log(self.median)), self.sigma, size=size))


Distribution = Annotated[
    FixedDist | UniformDist | NormalDist | LognormalDist,
    Field(discriminator="type"),
    BeforeValidator(_fixed_shorthand),
]
"""A token-count distribution; a bare integer means `fixed`."""


def uniform_by_default(low: int, high: int, description: str) -> Any:
    """A `Distribution` field that draws uniformly from [low, high] unless set."""
    return Field(
        default_factory=lambda: UniformDist(type="uniform", min=low, max=high),
        description=description,
    )


def fixed_by_default(value: int, description: str) -> Any:
    """A `Distribution` field that is always `value` unless set."""
    return Field(
        default_factory=lambda: FixedDist(type="fixed", value=value), description=description
    )
