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
    """Seconds a step takes; `prefill_s` and `decode_s` are its two textbook cases.

    A step is given as its decodes (sequences adding one token to a context they
    already hold) summed, and its other chunks listed: the models' cost of a decode is
    linear in its context (the roofline's attention and KV reads, the fitted model's
    per-token context term), so the sum prices them exactly, and the scheduler adds a
    context per decode instead of building a chunk for each one
    (tests/bench/bench_sim_step_cpu.py)."""

    @abstractmethod
    def batch_s(
        self, decodes: int, decode_context: int, chunks: list[Chunk]
    ) -> tuple[float, float, float]:
        """(step seconds, compute seconds, memory seconds) for `decodes` sequences
        decoding one token each over `decode_context` context tokens in all, and the
        other sequences' `chunks` (none of them a decode: `split_decodes`). Compute and
        memory feed the modelled GPU gauges; a model that does not split them reports
        the whole step as compute."""

    def step_s(self, chunks: list[Chunk]) -> tuple[float, float, float]:
        """`batch_s` for a batch given as one `Chunk` per sequence."""
        return self.batch_s(*split_decodes(chunks))

    def prefill_s(self, prompt_tokens: int) -> float:
        """One request alone: its whole prompt in one step (first token included)."""
        return self.batch_s(0, 0, [(0, prompt_tokens)])[0]

    def decode_s(self, batch: int, context: int) -> float:
        """A decode step for `batch` sequences of `context` tokens each."""
        return self.batch_s(batch, batch * context, [])[0]


def split_decodes(chunks: list[Chunk]) -> tuple[int, int, list[Chunk]]:
    """(decodes, their total context, the other chunks): `batch_s`'s arguments."""
    decodes = context = 0
    others: list[Chunk] = []
    for chunk in chunks:
        if chunk[1] == 1 and chunk[0] > 0:  # one new token over a context already held
            decodes += 1
            context += chunk[0]
        else:
            others.append(chunk)
    return decodes, context, others
