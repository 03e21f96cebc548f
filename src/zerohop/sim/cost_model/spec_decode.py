"""A modelled draft model: speculative decoding in the embedded target.

With `engine.spec_draft_tokens` K > 0, every decode step of a sequence proposes K draft
tokens and verifies them in the target's forward pass. Draft i (1-based) is accepted
with probability `spec_acceptance` P if every draft before it was, so the accepted
prefix is a truncated geometric draw (E[accepted] = P + P^2 + ... + P^K), drawn from a
generator seeded by the sim's seed. The step emits accepted + 1 tokens (the accepted
drafts and the target's own token), as vLLM's rejection sampler does; near the end of
an answer the tokens beyond it are dropped, but the counters count the draw.

The step's cost (`SpeculativeStepCost`): the verification prices each decode as a
chunk of 1 + K new tokens over its context with the engine's step-cost model (decode
is memory-bound, so this is about one step plus a small per-draft compute and KV
increment), plus the draft model's K sequential proposals at
`spec_draft_ms_per_token` each.

The counters are vLLM V1's (`vllm:spec_decode_*`, exported by `sim.metrics`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from zerohop.sim.cost_model.step_cost import Chunk, StepCostModel


@dataclass
class SpecDecodeCounters:
    """vLLM V1's speculative-decoding counters: drafts (one per sequence per decode
    step), draft tokens proposed, draft tokens accepted, and accepted per position."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)


class DraftModel:
    """Draws how many of K drafts the target accepts, and counts them."""

    def __init__(self, draft_tokens: int, acceptance: float, seed: int) -> None:
        self.draft_tokens = draft_tokens
        self.acceptance = acceptance
        self._random = random.Random(seed).random
        self.counters = SpecDecodeCounters(accepted_per_pos=[0] * draft_tokens)

    def verify(self) -> int:
        """One draft of K tokens verified: the length of its accepted prefix."""
        k, p, draw = self.draft_tokens, self.acceptance, self._random
        accepted = 0
        while accepted < k and draw() < p:
            accepted += 1
        c = self.counters
        c.drafts += 1
        c.draft_tokens += k
        c.accepted_tokens += accepted
        per_pos = c.accepted_per_pos
        for position in range(accepted):
            per_pos[position] += 1
        return accepted


class SpeculativeStepCost(StepCostModel):
    """`inner`'s cost with each decode verifying K drafts, plus the draft model's K
    proposals (see the module docstring)."""

    def __init__(self, inner: StepCostModel, draft_tokens: int, draft_ms_per_token: float) -> None:
        self.inner = inner
        self.draft_tokens = draft_tokens
        self.draft_s = draft_tokens * draft_ms_per_token / 1e3

    def batch_s(
        self, decodes: int, decode_context: int, chunks: list[Chunk]
    ) -> tuple[float, float, float]:
        if not decodes:
            return self.inner.batch_s(0, 0, chunks)
        # the decodes' contexts split as evenly as their sum allows: the cost models are
        # linear in a chunk's context, so the sum prices them as the real contexts would
        share, extra = divmod(decode_context, decodes)
        new = 1 + self.draft_tokens
        verify = [(share + 1, new)] * extra + [(share, new)] * (decodes - extra)
        step, compute, memory = self.inner.batch_s(0, 0, chunks + verify)
        return step + self.draft_s, compute + self.draft_s, memory
