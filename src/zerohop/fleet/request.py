"""One request on the virtual clock: its sizes and times, and the engine's sink for it.

The engine hands a sequence's tokens to its `TokenSink`; here the request itself is the
sink, so the clock hears of a first token, an end or an engine error without a lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from zerohop.sim.sequence import EngineError, PreparedWrite, Sequence


@dataclass(eq=False, slots=True)
class FleetRequest:
    index: int
    workload: int
    arrival_ns: int
    prompt_tokens: int
    max_tokens: int
    recorded: bool  # in the records sample: its token times are kept
    on_end: Callable[[FleetRequest, int, EngineError | None], None]
    replica: int = -1  # the replica it was sent to (-1: not yet)
    sent_ns: int = 0  # when it reached the replica
    seq: Sequence | None = None
    token_ns: list[int] = field(default_factory=list)

    # --- TokenSink ----------------------------------------------------------------------
    def prepare_token(self, seq: Sequence, finished: bool) -> PreparedWrite | None:
        return None

    def on_token(self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
                 ) -> None:
        if self.recorded:
            self.token_ns.append(scheduled_ns)
        if finished:
            self.on_end(self, scheduled_ns, None)

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        self.on_end(self, -1, error)
