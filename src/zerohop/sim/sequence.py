"""A request inside the engine, and the sink its tokens go to.

The engine schedules `Sequence`s; each carries a `TokenSink` (the HTTP response of its
request) that prepares every token's bytes while the step runs and hears of it when the
step ends. Errors reach the sink as an `EngineError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class EngineError(Exception):
    """A typed engine failure. `status` is the HTTP status when raised before the
    response started; after that it travels in-stream with `error_type`."""

    def __init__(self, error_type: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.status = status


PreparedWrite = tuple[Callable[[bytes], object], bytes, Callable[[], bool]]
"""One token ready to go: (write, its bytes, is_closing) of the socket it goes to."""


class TokenSink(Protocol):
    """Where a sequence's tokens go (the HTTP response of its request)."""

    def prepare_token(self, seq: Sequence, finished: bool) -> PreparedWrite | None:
        """The token `seq` samples in the step being planned, for the engine to write
        the moment the step ends; None leaves the write to `on_token`."""
        ...

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        """Token `seq.num_output` was sampled; `written_ns` is when the engine wrote its
        prepared bytes (0: it did not, the sink writes now if it wants to)."""
        ...

    def on_error(self, seq: Sequence, error: EngineError) -> None: ...


class NullSink:
    """A sink that takes nothing: for offline runs that read the token times off the
    Sequence, and for a sequence whose response has ended (`NULL_SINK`), which breaks the
    sequence <-> response reference cycle so both are freed at once instead of piling
    up for a long garbage-collector pause."""

    def prepare_token(self, seq: Sequence, finished: bool) -> None:
        return None

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        return None

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        return None


NULL_SINK = NullSink()


@dataclass(eq=False, slots=True)
class Sequence:
    request_id: str
    prompt_tokens: int
    target_output: int  # tokens this answer will have (<= max_tokens)
    max_tokens: int
    sink: TokenSink
    arrival_ns: int
    adapter: str | None = None
    num_computed: int = 0  # tokens whose KV is in the cache
    num_output: int = 0  # tokens sampled (and handed to the sink)
    blocks: int = 0
    paused_until_ns: int = 0  # a stall fault: not scheduled before this time
    pause_after_tokens: int = -1  # stall_mid: pause once num_output reaches this
    pause_ns: int = 0
    first_scheduled_ns: int | None = None
    first_token_ns: int | None = None  # modelled (scheduled) time of token 1
    last_token_ns: int | None = None
    preemptions: int = 0
    block_hashes: tuple[int, ...] = ()  # the prompt's full blocks (prefix-cache keys)
    cache_refs: list[int] = field(default_factory=list)  # the cached blocks it holds
    blocks_hashed: int = 0  # leading prompt blocks the prefix cache has seen
    num_cached: int = 0  # prompt tokens the prefix cache gave at its first scheduling
    remote_kv_tokens: int = 0  # PD decode: prompt tokens whose KV came from the prefill
    done: bool = False
    finish_reason: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def planned_finish_reason(self) -> str:
        """Why the answer ends once it has `target_output` tokens."""
        return "length" if self.target_output >= self.max_tokens else "stop"

