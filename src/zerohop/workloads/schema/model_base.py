"""What every workload model shares: strictness and the YAML shorthands.

Every section of a workload file is a `StrictModel`: an unknown key is an error (a typo
never passes silently) and a validated spec never changes afterwards (derived specs are
copies).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

__all__ = ["StrictModel", "require_increasing", "tag_shorthand"]


class StrictModel(BaseModel):
    """Unknown keys are errors, and a validated spec never changes afterwards."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def tag_shorthand(tag_key: str) -> Any:
    """Let YAML say `arrival: poisson` for `arrival: {type: poisson}`."""

    def convert(value: Any) -> Any:
        return {tag_key: value} if isinstance(value, str) else value

    return BeforeValidator(convert)


def require_increasing(times: Sequence[float], what: str) -> None:
    """Knots and steps in strictly increasing `at_s` (ValueError names the pair)."""
    for earlier, later in itertools.pairwise(times):
        if later <= earlier:
            raise ValueError(
                f"{what} must be in strictly increasing at_s ({later} after {earlier})"
            )
