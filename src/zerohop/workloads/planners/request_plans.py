"""Request plans: what each worker sends next, and when.

`make_planner(spec, seed=..., worker_index=i, worker_count=N)` turns a validated workload
spec into a `Planner` for one worker (one Locust process or user group):

* closed loop: `next_request()` gives the next request (no schedule) and
  `think_time_s()` the pause after it;
* open loop and traces: `schedule()` yields requests with `scheduled_offset_s` from the
  start of the run. All workers derive the same total schedule from the same seed and
  worker i keeps arrivals i, i+N, ... (see `arrivals`), so the union over workers is the
  requested process or the trace itself.

Randomness: the arrival times come from a generator shared by all workers (seed and
workload name); prompt contents, sizes and adapters from one generator per
(seed, workload name, worker_index), so workers differ and every run is reproducible;
the prompt's words come from a generator of their own, so a builder that draws more or
fewer words (exact sizing against `/tokenize`, a new vocabulary) moves no request size.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from zerohop.workloads.content.prompts import token_ids
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.planners.worker_load import WorkerLoadShare, WorkerSetup, worker_setup
from zerohop.workloads.schema.kinds import (
    ApiName,
    LongContextSpec,
    LoraMixSpec,
    ShortQueryFloodSpec,
    TraceReplaySpec,
)
from zerohop.workloads.schema.load_spec import ClosedLoad, TraceLoad
from zerohop.workloads.timing.arrivals import schedule_for_load, worker_share
from zerohop.workloads.timing.traces import (
    MOONCAKE_BLOCK_TOKENS,
    TraceRequest,
    read_trace,
    replay_window,
)

__all__ = [
    "PlannedRequest",
    "Planner",
    "chat_as_text",
    "lengths_planner",
    "make_planner",
    "request_planner",
    "zipf_probabilities",
]

log = logging.getLogger("zerohop")

_ARRIVAL_STREAM = 1
_CONTENT_STREAM = 2
_TEXT_STREAM = 5  # prompt words and token ids: how many a builder draws moves no size
_DEFAULT_TRACE_MAX_TOKENS = 128


def arrival_seed(seed: int, name: str) -> tuple[int, int, int]:
    """The seed of a workload's open-loop arrival schedule: the run's seed and the
    workload's name, so a simulation of the same file offers the same arrivals."""
    return (seed, zlib.crc32(name.encode()), _ARRIVAL_STREAM)


@dataclass(frozen=True, eq=False)
class PlannedRequest:
    """One request to send: everything a protocol adapter needs, nothing about HTTP.

    Exactly one of `prompt` (text) / `token_ids` is set. `model` is the value for the
    request's `model` field (None: the server's first model); for a LoRA request it is
    the adapter's name, which is how vLLM and SGLang address adapters. A prompt of
    several messages (a system prompt, a conversation's history) is `chat`, (role,
    content) pairs; `prompt` is then the same messages flattened (`chat_as_text`) for
    the completions API. An agent loop's history (`history`) is chat-shaped messages
    with tool calls, which only the chat and Anthropic APIs carry."""

    workload: str
    kind: str
    api: ApiName
    model: str | None
    adapter: str | None
    prompt: str | None
    token_ids: list[int] | None
    target_input_tokens: int
    max_tokens: int
    ignore_eos: bool
    temperature: float
    scheduled_offset_s: float | None
    trace_row: int | None
    sequence: int  # this worker's running count of planned requests, from 0
    worker_index: int
    prefix_group: int | None = None
    # the size asked is one the target's tokenizer cannot make (below the smallest
    # request, or between two it can): the nearest was sent (None: not sized here)
    prompt_clamped: bool | None = None
    chat: tuple[tuple[str, str], ...] | None = None
    session_id: str | None = None  # a conversation's session and turn (1, 2, ...)
    turn: int | None = None
    # an agent loop's model call: its history in the chat API's shape (the model's
    # tool calls and their results included; wins over `chat`), the tools it offers
    # (OpenAI function tool definitions) and how it may use them, its step (1, 2, ...)
    # and the loop's cap on steps
    history: tuple[dict[str, Any], ...] | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    tool_choice: str | None = None
    agent_step: int | None = None
    agent_max_steps: int | None = None

    @property
    def messages(self) -> list[dict[str, Any]] | None:
        """The prompt as chat messages (chat and Anthropic APIs): `history` or `chat`,
        else one user message; None for a token-id prompt, which only the completions
        API can carry."""
        if self.history is not None:
            return [dict(message) for message in self.history]
        if self.chat is not None:
            return [{"role": role, "content": content} for role, content in self.chat]
        if self.prompt is None:
            return None
        return [{"role": "user", "content": self.prompt}]


def chat_as_text(chat: Sequence[tuple[str, str]]) -> str:
    """Messages as one completions prompt: their contents in order, a blank line apart.
    No role labels: the words are generated, so labels would carry no meaning, only
    tokens the calibration does not know of (and the size would miss its target)."""
    return "\n\n".join(content for _role, content in chat)


def make_planner(
    workload_spec: Any, *, trace_requests: Sequence[TraceRequest] | None = None, **setup: Any
) -> Planner:
    """The planner for one worker of one workload. `setup` are `worker_setup`'s keywords
    (seed, worker_index, worker_count; calibration, default_api, builder), checked there.
    `trace_requests` lets a caller that already read the trace pass it in (else the
    spec's trace is read here)."""
    return request_planner(workload_spec, worker_setup(workload_spec, **setup),
                           trace_requests=trace_requests)


def request_planner(
    workload_spec: Any, setup: WorkerSetup, *, trace_requests: Sequence[TraceRequest] | None = None
) -> Planner:
    """`make_planner` for a caller that has the worker's setup."""
    return Planner(spec=workload_spec, sizer=_make_sizer(workload_spec, trace_requests),
                   setup=setup)


def lengths_planner(workload_spec: Any, setup: WorkerSetup, *, input_tokens: Any,
                    output_tokens: Any) -> Planner:
    """The planner of a kind whose requests differ only in their sizes, each drawn from a
    distribution (`distributions.DistributionBase`): what a new single-request kind's
    planner can be (docs/architecture.md, "Adding a workload kind")."""
    return Planner(spec=workload_spec, sizer=_LengthSizer(input_tokens, output_tokens),
                   setup=setup)


@dataclass(frozen=True)
class _Draft:
    """Sizes and routing of one request before its prompt is built."""

    input_tokens: int
    max_tokens: int
    adapter: str | None = None
    trace_row: int | None = None
    prefix_group: int | None = None
    hash_ids: tuple[int, ...] = ()
    block_tokens: int = 0


class Planner(WorkerLoadShare):
    """Plans one worker's requests for one workload (see the module docstring)."""

    def __init__(self, *, spec: Any, sizer: _Sizer, setup: WorkerSetup) -> None:
        self.spec = spec
        self.api: ApiName = setup.api
        self.worker_index = setup.worker_index
        self.worker_count = setup.worker_count
        self.calibration = setup.calibration
        self._sizer = sizer
        self._builder = setup.builder
        name_key = zlib.crc32(spec.name.encode())
        self._arrival_seed = arrival_seed(setup.seed, spec.name)
        self._rng = np.random.default_rng(
            [setup.seed, name_key, _CONTENT_STREAM, setup.worker_index])
        self._text_rng = np.random.default_rng(
            [setup.seed, name_key, _TEXT_STREAM, setup.worker_index])
        self._sequence = 0
        self._closed_position = 0
        self._said_clamped = False

    # --- closed loop -------------------------------------------------------------------
    def next_request(self) -> PlannedRequest:
        """The next request with no schedule (closed loop; also usable for warm-up)."""
        draft = self._sizer.closed(
            self._rng, self._closed_position, self.worker_index, self.worker_count
        )
        self._closed_position += 1
        return self._finish(draft, scheduled_offset_s=None)

    # --- open loop and traces ------------------------------------------------------------
    def schedule(self, duration_s: float | None = None) -> Iterator[PlannedRequest]:
        """This worker's share of the scheduled requests, in time order, with offsets
        from the run's start; stops at `duration_s` (None: when the plan ends, which for
        an open load with a non-zero final rate is never)."""
        load = self.spec.load
        if isinstance(load, ClosedLoad):
            raise ValueError(
                f"workload '{self.workload}' is closed-loop: use next_request(), not schedule()"
            )
        if isinstance(load, TraceLoad):
            timed = self._sizer.timed_rows()
            for row in worker_share(timed, self.worker_index, self.worker_count):
                offset = row.offset_s if row.offset_s is not None else 0.0
                if duration_s is not None and offset >= duration_s:
                    return
                yield self._finish(self._sizer.from_row(row, self._rng), scheduled_offset_s=offset)
            return
        arrivals = schedule_for_load(load, self._arrival_seed)
        shares = worker_share(enumerate(arrivals), self.worker_index, self.worker_count)
        for arrival_index, offset in shares:
            if duration_s is not None and offset >= duration_s:
                return
            draft = self._sizer.open(self._rng, arrival_index)
            yield self._finish(draft, scheduled_offset_s=offset)

    # --- building the request -------------------------------------------------------------
    def _finish(self, draft: _Draft, *, scheduled_offset_s: float | None) -> PlannedRequest:
        spec = self.spec
        prompt_text: str | None = None
        ids: list[int] | None = None
        target = draft.input_tokens
        clamped: bool | None = None
        if spec.prompt_format == "token_ids":
            ids = token_ids(target, self._text_rng, spec.token_id_vocab_size)
        elif draft.hash_ids and draft.block_tokens > 0:
            units = self.calibration.units_for_tokens(target)
            block_units = self.calibration.block_units(draft.block_tokens)
            prompt_text = self._builder.build_from_blocks(draft.hash_ids, block_units, units)
        else:
            prompt_text, built = self._builder.build_counted(target, self._text_rng,
                                                             self.calibration)
            clamped = self._clamped(target, built)
        request = PlannedRequest(
            workload=spec.name,
            kind=spec.kind,
            api=self.api,
            model=draft.adapter if draft.adapter is not None else spec.model,
            adapter=draft.adapter,
            prompt=prompt_text,
            token_ids=ids,
            target_input_tokens=target,
            max_tokens=max(1, draft.max_tokens),
            ignore_eos=spec.ignore_eos,
            temperature=spec.temperature,
            scheduled_offset_s=scheduled_offset_s,
            trace_row=draft.trace_row,
            sequence=self._sequence,
            worker_index=self.worker_index,
            prefix_group=draft.prefix_group,
            prompt_clamped=clamped,
        )
        self._sequence += 1
        return request

    def _clamped(self, target: int, built: int | None) -> bool:
        """Whether the prompt could not be `target` tokens: below the smallest request
        this target allows, or (by the word table's count `built`) a size its tokenizer
        cannot make. Said once per worker and workload, on the first such request."""
        smallest = self.calibration.smallest_prompt_tokens()
        if target >= smallest and (built is None or built == target):
            return False
        if not self._said_clamped:
            self._said_clamped = True
            sent = smallest if target < smallest else built
            log.warning(
                "zerohop: warning: workload '%s' asks a prompt of %d tokens, which this "
                "target's tokenizer cannot make (its smallest request, framing and one word, "
                "is %d tokens): it is sent at %s tokens, the nearest it can, and such "
                "records say prompt_clamped=true", self.spec.name, target, smallest, sent)
        return True


# ---------------------------------------------------------------------------------------
# sizers: one per workload kind, deciding sizes/adapters (the planner builds the prompt)
# ---------------------------------------------------------------------------------------
class _Sizer:
    """Draws request sizes; `closed` for the k-th closed-loop request of a worker,
    `open` for the k-th arrival of the shared schedule."""

    def closed(
        self, rng: np.random.Generator, position: int, worker_index: int, worker_count: int
    ) -> _Draft:
        return self.draw(rng)

    def open(self, rng: np.random.Generator, arrival_index: int) -> _Draft:
        return self.draw(rng)

    def draw(self, rng: np.random.Generator) -> _Draft:
        raise NotImplementedError

    def timed_rows(self) -> Sequence[TraceRequest]:
        raise ValueError("this workload has no trace timestamps")

    def from_row(self, row: TraceRequest, rng: np.random.Generator) -> _Draft:
        raise ValueError("this workload has no trace rows")


@dataclass
class _LengthSizer(_Sizer):
    """short_query_flood and long_context: input and output lengths from distributions."""

    input_tokens: Any
    output_tokens: Any

    def draw(self, rng: np.random.Generator) -> _Draft:
        return _Draft(
            input_tokens=self.input_tokens.sample_one(rng),
            max_tokens=self.output_tokens.sample_one(rng),
        )


@dataclass
class _LoraSizer(_Sizer):
    """lora_mix: an adapter by Zipf popularity (or the base model), then lengths."""

    adapters: list[str]
    zipf_s: float
    base_model_share: float
    lengths: _LengthSizer
    _cdf: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cdf = np.cumsum(zipf_probabilities(len(self.adapters), self.zipf_s))

    def draw(self, rng: np.random.Generator) -> _Draft:
        lengths = self.lengths.draw(rng)
        if self.base_model_share > 0 and rng.random() < self.base_model_share:
            return lengths
        rank = int(np.searchsorted(self._cdf, rng.random() * self._cdf[-1], side="right"))
        return replace(lengths, adapter=self.adapters[min(rank, len(self.adapters) - 1)])


@dataclass
class _TraceSizer(_Sizer):
    """trace_replay: lengths (and prefix blocks) from the trace's rows."""

    rows: Sequence[TraceRequest]
    spec: TraceReplaySpec

    def timed_rows(self) -> Sequence[TraceRequest]:
        return self.rows

    def closed(
        self, rng: np.random.Generator, position: int, worker_index: int, worker_count: int
    ) -> _Draft:
        # worker i cycles through rows i, i+N, ...: the workers together cover the trace
        index = (worker_index + position * worker_count) % len(self.rows)
        return self.from_row(self.rows[index], rng)

    def open(self, rng: np.random.Generator, arrival_index: int) -> _Draft:
        return self.from_row(self.rows[arrival_index % len(self.rows)], rng)

    def from_row(self, row: TraceRequest, rng: np.random.Generator) -> _Draft:
        scaling = self.spec.scale_tokens
        input_tokens = scaling.scale_input(row.input_tokens) if scaling else row.input_tokens
        if row.output_tokens is not None:
            output = row.output_tokens
            max_tokens = scaling.scale_output(output) if scaling else output
        elif self.spec.max_tokens is not None:
            max_tokens = self.spec.max_tokens.sample_one(rng)
        else:
            max_tokens = _DEFAULT_TRACE_MAX_TOKENS
        use_blocks = self.spec.use_prefix_blocks and bool(row.hash_ids)
        block_tokens = MOONCAKE_BLOCK_TOKENS
        if use_blocks and scaling is not None:
            block_tokens = max(1, round(MOONCAKE_BLOCK_TOKENS * scaling.input_multiplier))
        return _Draft(
            input_tokens=max(1, input_tokens),
            max_tokens=max(1, max_tokens),
            trace_row=row.row,
            prefix_group=row.prefix_group,
            hash_ids=row.hash_ids if use_blocks else (),
            block_tokens=block_tokens if use_blocks else 0,
        )


def zipf_probabilities(count: int, s: float) -> np.ndarray:
    """P(rank r) ∝ 1 / r^s for r = 1..count (s = 0: uniform)."""
    if count < 1:
        raise ValueError("need at least one adapter")
    weights = 1.0 / np.power(np.arange(1, count + 1, dtype=np.float64), s)
    probabilities: np.ndarray = weights / weights.sum()
    return probabilities


def _make_sizer(spec: Any, trace_requests: Sequence[TraceRequest] | None) -> _Sizer:
    if isinstance(spec, ShortQueryFloodSpec):
        return _LengthSizer(spec.input_tokens, spec.max_tokens)
    if isinstance(spec, LongContextSpec):
        return _LengthSizer(spec.document_tokens, spec.summary_tokens)
    if isinstance(spec, LoraMixSpec):
        return _LoraSizer(
            adapters=spec.adapters.resolved_names(),
            zipf_s=spec.zipf_s,
            base_model_share=spec.base_model_share,
            lengths=_LengthSizer(spec.input_tokens, spec.max_tokens),
        )
    if isinstance(spec, TraceReplaySpec):
        rows = trace_requests if trace_requests is not None else read_trace(
            spec.trace, spec.resolved_format
        )
        window = replay_window(
            rows,
            speed=spec.speed,
            start_offset_s=spec.start_offset_s,
            duration_s=spec.duration_s,
            max_requests=spec.max_requests,
        )
        if not window:
            raise WorkloadError(
                f"workload '{spec.name}': no trace requests in the window "
                f"(start_offset_s={spec.start_offset_s}, duration_s={spec.duration_s}, "
                f"speed={spec.speed})"
            )
        return _TraceSizer(window, spec)
    raise TypeError(f"not a workload spec: {type(spec).__name__}")

