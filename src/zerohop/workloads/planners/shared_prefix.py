"""Shared-prefix plans: one system prompt from a pool, then a question of its own.

The pool is the same on every worker (its lengths and words come from the run's seed
and the workload's name, never the worker's), so the requests of all workers that pick
prompt r share its prefix, as the clients of one application share its system prompt.
Requests pick a prompt by rank popularity (uniform, or Zipf: P(r) ∝ 1/r^s) and add a
question drawn fresh each time, so two requests share the system prompt and nothing
after it.

On the chat APIs the prompt is a system message and a user message (the target size
counts the system message's template as half the calibrated overhead, which holds one
message and the request's own); on the completions API it is the system prompt, a
blank line and the question.

`prefix_mode: unique` is the control: the same pool, the same sizes, but the first
`SALT_UNITS` words of every system prompt are replaced by a salt no other request of
the run has (random words, then this worker's index and the request's sequence number
written in the builder's words), so no request can reuse another's cached prefix.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from zerohop.core.apis import api_spec
from zerohop.workloads.planners.request_plans import (
    PlannedRequest,
    Planner,
    _Draft,
    _Sizer,
    chat_as_text,
    zipf_probabilities,
)
from zerohop.workloads.planners.worker_load import WorkerSetup
from zerohop.workloads.schema.kinds import SharedPrefixSpec

__all__ = ["SALT_UNITS", "SharedPrefixPlanner", "make_shared_prefix_planner"]

SALT_UNITS = 8
_POOL_STREAM = 3
_SALT_STREAM = 4  # its own stream: a unique run draws the same plan as a shared one
_SEQUENCE_DIGITS = 3  # base-4096 digits of the sequence number: 68 billion requests


def make_shared_prefix_planner(spec: SharedPrefixSpec, setup: WorkerSetup) -> SharedPrefixPlanner:
    """The planner of one worker."""
    pool_rng = np.random.default_rng([setup.seed, zlib.crc32(spec.name.encode()), _POOL_STREAM])
    sizer = _PrefixSizer(
        spec=spec,
        lengths=[int(n) for n in spec.prefixes.tokens.sample(pool_rng, spec.prefixes.count)],
    )
    return SharedPrefixPlanner(spec=spec, sizer=sizer, setup=setup)


@dataclass
class _PrefixSizer(_Sizer):
    """Which prompt of the pool (by popularity), the question's and the answer's size."""

    spec: SharedPrefixSpec
    lengths: list[int]
    _cdf: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pool = self.spec.prefixes
        s = pool.zipf_s if pool.popularity == "zipf" else 0.0
        self._cdf = np.cumsum(zipf_probabilities(pool.count, s))

    def draw(self, rng: np.random.Generator) -> _Draft:
        rank = int(np.searchsorted(self._cdf, rng.random() * self._cdf[-1], side="right"))
        return _Draft(
            input_tokens=self.spec.question_tokens.sample_one(rng),
            max_tokens=self.spec.max_tokens.sample_one(rng),
            prefix_group=min(rank, len(self.lengths) - 1),
        )


class SharedPrefixPlanner(Planner):
    """A `Planner` whose requests are a pooled system prompt and a fresh question."""

    def __init__(self, *, spec: SharedPrefixSpec, sizer: _PrefixSizer,
                 setup: WorkerSetup) -> None:
        super().__init__(spec=spec, sizer=sizer, setup=setup)
        seed = setup.seed
        self._pool_sizer = sizer
        self._pool_seed = (seed, zlib.crc32(spec.name.encode()), _POOL_STREAM)
        self._prefix_texts: dict[int, list[str]] = {}
        self._salt_rng = np.random.default_rng(
            [seed, zlib.crc32(spec.name.encode()), _SALT_STREAM, self.worker_index])

    def prefix_tokens(self, index: int) -> int:
        """The length in tokens of the pool's prompt `index`."""
        return self._pool_sizer.lengths[index]

    def _prefix_words(self, index: int) -> list[str]:
        words = self._prefix_texts.get(index)
        if words is None:
            rng = np.random.default_rng([*self._pool_seed, index])
            units = self.calibration.block_units(self.prefix_tokens(index))
            words = self._builder.build_text(units, rng).split(" ")
            self._prefix_texts[index] = words
        return words

    def _salt(self) -> list[str]:
        """Words no other request of this run starts its system prompt with."""
        vocabulary = self._builder.vocabulary
        size = len(vocabulary)
        digits = [self.worker_index % size]
        number = self._sequence
        for _ in range(_SEQUENCE_DIGITS):
            number, digit = divmod(number, size)
            digits.append(digit)
        random_part = self._salt_rng.integers(0, size, size=max(0, SALT_UNITS - len(digits)))
        return [vocabulary[i] for i in [*random_part.tolist(), *digits]]

    def _system_template_tokens(self) -> int:
        """What the system message adds on a chat API: one message's share of the
        calibration's template overhead (which counts one message and the request)."""
        if not api_spec(self.api).chat_messages:
            return 0
        return max(0, round(self.calibration.b / 2))

    def _finish(self, draft: _Draft, *, scheduled_offset_s: float | None) -> PlannedRequest:
        spec = self.spec
        index = draft.prefix_group
        assert index is not None  # the sizer always picks a prompt
        words = self._prefix_words(index)
        if spec.prefix_mode == "unique":
            words = self._salt() + words[SALT_UNITS:]  # a shorter prompt gets the whole salt
        system = " ".join(words)
        question = self._builder.build_for_tokens(draft.input_tokens, self._rng, self.calibration)
        chat = (("system", system), ("user", question))
        request = PlannedRequest(
            workload=spec.name, kind=spec.kind, api=self.api, model=spec.model, adapter=None,
            prompt=chat_as_text(chat), token_ids=None,
            target_input_tokens=self.prefix_tokens(index) + draft.input_tokens
            + self._system_template_tokens(),
            max_tokens=max(1, draft.max_tokens), ignore_eos=spec.ignore_eos,
            temperature=spec.temperature, scheduled_offset_s=scheduled_offset_s,
            trace_row=None, sequence=self._sequence, worker_index=self.worker_index,
            prefix_group=index, chat=chat,
        )
        self._sequence += 1
        return request
