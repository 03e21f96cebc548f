"""What the planners of multi-request sessions (conversations, agent loops) share: one
worker's sessions, one after another (closed loop) or on the arrival clock (open loop),
each with its own seeded draws, and the template tokens a later request's new messages
add, learnt from the server's counts."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

import numpy as np

from zerohop.workloads.planners.worker_load import WorkerLoadShare, WorkerSetup
from zerohop.workloads.schema.kinds import ApiName
from zerohop.workloads.schema.load_spec import ClosedLoad
from zerohop.workloads.timing.arrivals import schedule_for_load, worker_share

_ARRIVAL_STREAM = 1
_CONTENT_STREAM = 2
_CLOSED = 0  # session streams: a closed-loop worker's n-th session, or the n-th arrival
_OPEN = 1

S = TypeVar("S")


class SessionPlanner(WorkerLoadShare, Generic[S]):
    """Plans one worker's sessions of one workload; a subclass makes one session from
    its id, its position (which recorded session it replays), its arrival offset and
    its own random generator (`_make`)."""

    def __init__(self, *, spec: Any, setup: WorkerSetup) -> None:
        self.spec = spec
        self.api: ApiName = setup.api
        self.builder = setup.builder
        self.calibration = setup.calibration
        self.worker_index = setup.worker_index
        self.worker_count = setup.worker_count
        self._seed = setup.seed
        self._name_key = zlib.crc32(spec.name.encode())
        self._rng = self._content_rng((setup.worker_index,))
        self._sessions = 0
        self._sequence = 0
        self._template_sum = 0.0
        self._template_count = 0

    def _make(self, session_id: str, position: int, offset: float | None,
              rng: np.random.Generator) -> S:
        raise NotImplementedError

    def next_session(self) -> S:
        """Closed loop: this worker's next session (worker i of N takes recorded
        sessions i, i+N, ...)."""
        number = self._sessions
        self._sessions += 1
        position = self.worker_index + number * self.worker_count
        return self._make(f"{self.spec.name}-{self.worker_index}-{number}", position, None,
                          self._content_rng((_CLOSED, self.worker_index, number)))

    def schedule(self, duration_s: float | None = None) -> Iterator[S]:
        """Open loop: this worker's share of the session arrivals, in time order."""
        load = self.spec.load
        if isinstance(load, ClosedLoad):
            raise ValueError(
                f"workload '{self.workload}' is closed-loop: use next_session(), not schedule()"
            )
        arrivals = schedule_for_load(load, (self._seed, self._name_key, _ARRIVAL_STREAM))
        for index, offset in worker_share(enumerate(arrivals), self.worker_index,
                                          self.worker_count):
            if duration_s is not None and offset >= duration_s:
                return
            self._sessions += 1
            yield self._make(f"{self.spec.name}-a{index}", index, offset,
                             self._content_rng((_OPEN, index)))

    def _content_rng(self, stream: tuple[int, ...]) -> np.random.Generator:
        return np.random.default_rng([self._seed, self._name_key, _CONTENT_STREAM, *stream])

    # --- the template tokens of a later request's new messages -------------------------
    def template_tokens(self) -> float:
        """What a later request's new messages add besides what the planner counts: the
        mean of what the server's counts showed so far (it evens out each message's
        rounding to whole words), else the calibration's template overhead."""
        if self._template_count == 0:
            return max(0.0, self.calibration.b)
        return self._template_sum / self._template_count

    def observe_template(self, tokens: float) -> None:
        """A later request's count, less what the planner counted: its template."""
        self._template_sum += tokens
        self._template_count += 1
