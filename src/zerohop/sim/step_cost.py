"""The step-cost model: how long one engine step takes for the batch it runs.

The scheduler is the same whatever the device; only this cost changes. The engine
takes one as a parameter: the profile's `Roofline` by default, a cost fitted to a
measured server when planning calibrates the model (`planning.calibrate`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

Chunk = tuple[int, int]
"""One sequence's share of a step: (context tokens already in the KV cache, new tokens)."""


class StepCostModel(ABC):
    """Seconds a step takes; `prefill_s` and `decode_s` are its two textbook cases."""

    @abstractmethod
    def step_s(self, chunks: list[Chunk]) -> tuple[float, float, float]:
        """(step seconds, compute seconds, memory seconds) for a batch given as one
        `Chunk` per sequence. Compute and memory feed the modelled GPU gauges; a model
        that does not split them reports the whole step as compute."""

    def prefill_s(self, prompt_tokens: int) -> float:
        """One request alone: its whole prompt in one step (first token included)."""
        return self.step_s([(0, prompt_tokens)])[0]

    def decode_s(self, batch: int, context: int) -> float:
        """A decode step for `batch` sequences of `context` tokens each."""
        return self.step_s([(context, 1)] * batch)[0]
