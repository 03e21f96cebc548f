"""Conversation plans: sessions of turns, each turn carrying the whole history.

A `ConversationPlanner` hands out `Session`s: closed loop, `next_session()` (a user runs
one after another); open loop, `schedule()` (session arrivals on the seeded clock,
shared by all workers like every open load, worker i keeping arrivals i, i+N, ...).
A session knows its turns' sizes and think times up front, but the request of turn k
exists only once turn k-1 was answered: it holds the earlier user messages and the
model's own earlier answers (the text the target streamed back), so what the server
sees is the conversation it produced itself, prefix cache and all.

`run_session` plays one session with any `send` and `sleep` (Locust's greenlets, a
test's fake client): a turn is sent after the previous answer plus its think time, and
a failed turn ends the session.

Sizes: turn 1 is sized like any prompt (calibrated, template included); a later turn's
`target_input_tokens` is the previous turn's prompt as the server counted it, plus the
previous answer, the new message and the template the two new messages add: at first
the calibration's template overhead, then the mean of what the server's counts of
earlier turns (of any session of this worker) showed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from zerohop.workloads.content.prompts import count_regex_tokens
from zerohop.workloads.planners.request_plans import PlannedRequest, chat_as_text
from zerohop.workloads.planners.session_planner import SessionPlanner
from zerohop.workloads.planners.worker_load import WorkerSetup
from zerohop.workloads.schema.kinds import ConversationSpec
from zerohop.workloads.schema.session_specs import (
    MooncakeConversations,
    ShareGptConversations,
    SyntheticConversations,
)
from zerohop.workloads.timing.conversation_sources import (
    SessionShape,
    TurnShape,
    read_session_shapes,
)

__all__ = [
    "ConversationPlanner",
    "Session",
    "TurnPlan",
    "TurnResult",
    "make_conversation_planner",
    "run_session",
]



@dataclass(frozen=True)
class TurnPlan:
    """One turn's sizes, and the pause before it (after the previous turn's answer)."""

    user_tokens: int
    max_tokens: int
    think_time_s: float


@dataclass(frozen=True)
class TurnResult:
    """What `send` reports back for one turn: whether it was answered, the answer's text
    and the server's counts (None: not reported)."""

    ok: bool
    answer: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass
class Session:
    """One conversation: its turns' plan and, as they are answered, its history."""

    session_id: str
    turns: tuple[TurnPlan, ...]
    scheduled_offset_s: float | None
    planner: ConversationPlanner = field(repr=False)
    rng: np.random.Generator = field(repr=False)
    history: list[tuple[str, str]] = field(default_factory=list)
    answered_turns: int = 0
    _pending: tuple[str, int, float] | None = field(default=None, repr=False)
    _last_input_tokens: int = 0

    @property
    def done(self) -> bool:
        return self.answered_turns >= len(self.turns)

    @property
    def next_turn(self) -> int:
        """The number (1, 2, ...) of the turn to send next."""
        return self.answered_turns + 1

    def think_time_s(self) -> float:
        """The pause before the next turn (0 before the first)."""
        return 0.0 if self.done else self.turns[self.answered_turns].think_time_s

    def next_request(self) -> PlannedRequest:
        """The next turn's request: the history so far and a new user message."""
        if self.done:
            raise ValueError(f"session {self.session_id} has no turn left")
        plan = self.turns[self.answered_turns]
        calibration = self.planner.calibration
        builder = self.planner.builder
        template = 0.0
        if self.answered_turns == 0:
            units = calibration.units_for_tokens(plan.user_tokens, self.rng)
            target = plan.user_tokens
        else:
            units = calibration.block_units(plan.user_tokens)
            template = max(0.0, self.planner.template_tokens())
            target = round(self._last_input_tokens + plan.user_tokens + template)
        message = builder.build_text(units, self.rng)
        self._pending = (message, target, template)
        return self.planner.request(self, (*self.history, ("user", message)), target,
                                    plan.max_tokens)

    def answered(self, answer: str, *, input_tokens: int | None = None,
                 output_tokens: int | None = None) -> None:
        """The turn just sent was answered with `answer`: both join the history."""
        if self._pending is None:
            raise ValueError(f"session {self.session_id}: no turn was sent")
        message, target, template = self._pending
        self._pending = None
        if input_tokens and self.answered_turns > 0:  # the server's count shows the template
            self.planner.observe_template(input_tokens - (target - template))
        self.history += [("user", message), ("assistant", answer)]
        answer_tokens = output_tokens if output_tokens is not None else count_regex_tokens(answer)
        self._last_input_tokens = (input_tokens or target) + answer_tokens
        self.answered_turns += 1


def run_session(session: Session, send: Callable[[PlannedRequest], TurnResult],
                sleep: Callable[[float], None], *,
                stopping: Callable[[], bool] = lambda: False) -> int:
    """Play `session`: each turn after the previous answer and its think time, until the
    turns run out, a turn fails (the session ends there) or `stopping()` says the run
    is ending. Returns the turns answered."""
    while not session.done:
        pause = session.think_time_s()
        if pause > 0:
            sleep(pause)
        if stopping():
            break
        result = send(session.next_request())
        if not result.ok:
            break
        session.answered(result.answer, input_tokens=result.input_tokens,
                         output_tokens=result.output_tokens)
    return session.answered_turns


def make_conversation_planner(
    spec: ConversationSpec, setup: WorkerSetup, *, shapes: Sequence[SessionShape] | None = None
) -> ConversationPlanner:
    """The planner of one worker; `shapes` lets a caller pass sessions it already read
    (else a file source is read here)."""
    if shapes is None and spec.source.type != "synthetic":
        shapes = read_session_shapes(spec.source)
    return ConversationPlanner(spec=spec, setup=setup,
                               shapes=list(shapes) if shapes is not None else None)


class ConversationPlanner(SessionPlanner[Session]):
    """Plans one worker's sessions of one conversation workload."""

    def __init__(self, *, spec: ConversationSpec, setup: WorkerSetup,
                 shapes: list[SessionShape] | None) -> None:
        super().__init__(spec=spec, setup=setup)
        self._shapes = shapes

    def _make(self, session_id: str, position: int, offset: float | None,
              rng: np.random.Generator) -> Session:
        if self._shapes is None:
            shape = self._synthetic_shape(rng)
        else:
            shape = self._shapes[position % len(self._shapes)]
        return Session(session_id=session_id, turns=self._turn_plans(shape, rng),
                       scheduled_offset_s=offset, planner=self, rng=rng)

    def _synthetic_shape(self, rng: np.random.Generator) -> SessionShape:
        source = self.spec.source
        assert isinstance(source, SyntheticConversations)  # shapes are None only then
        count = source.turns.sample_one(rng)
        users = source.user_tokens.sample(rng, count)
        answers = source.answer_tokens.sample(rng, count)
        return tuple(TurnShape(int(u), int(a)) for u, a in zip(users, answers, strict=True))

    def _turn_plans(self, shape: SessionShape, rng: np.random.Generator
                    ) -> tuple[TurnPlan, ...]:
        spec = self.spec
        scaling = spec.scale_tokens
        if spec.max_turns is not None:
            shape = shape[: spec.max_turns]
        plans = []
        for number, turn in enumerate(shape):
            answer = turn.answer_tokens
            if answer is None:  # a ShareGPT turn without its reply
                source = spec.source
                fill = source.answer_tokens if isinstance(source, ShareGptConversations) else None
                answer = fill.sample_one(rng) if fill is not None else 1
            user = turn.user_tokens
            if scaling is not None:
                user, answer = scaling.scale_input(user), scaling.scale_output(answer)
            think = 0.0 if number == 0 else self._think_time_s(turn, rng)
            plans.append(TurnPlan(max(1, user), max(1, answer), think))
        return tuple(plans)

    def _think_time_s(self, turn: TurnShape, rng: np.random.Generator) -> float:
        source = self.spec.source
        if (isinstance(source, MooncakeConversations) and source.trace_think_times
                and turn.gap_s is not None):
            return turn.gap_s / source.speed
        if self.spec.think_time == "exponential" and self.spec.think_time_s > 0:
            return float(rng.exponential(self.spec.think_time_s))
        return float(self.spec.think_time_s)

    # --- the requests ----------------------------------------------------------------------
    def request(self, session: Session, chat: tuple[tuple[str, str], ...], target: int,
                max_tokens: int) -> PlannedRequest:
        """One turn's request (called by the session)."""
        spec = self.spec
        planned = PlannedRequest(
            workload=spec.name, kind=spec.kind, api=self.api, model=spec.model, adapter=None,
            prompt=chat_as_text(chat), token_ids=None, target_input_tokens=max(1, target),
            max_tokens=max(1, max_tokens), ignore_eos=spec.ignore_eos,
            temperature=spec.temperature,
            scheduled_offset_s=session.scheduled_offset_s if session.next_turn == 1 else None,
            trace_row=None, sequence=self._sequence, worker_index=self.worker_index,
            chat=chat, session_id=session.session_id, turn=session.next_turn,
        )
        self._sequence += 1
        return planned
