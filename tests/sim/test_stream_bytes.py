"""The streaming hot path: the engine writes chunks the response prepared when the step
was planned; they must be the very bytes the general path builds at the token, for every
API shape, answer length and finish reason, and each token's lag must be noted once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from zerohop.sim.answers.answer_plan import AnswerPlan, ToolCallPlan
from zerohop.sim.answers.answer_shapes import PlannedChatShape, PlannedMessagesShape
from zerohop.sim.answers.api_shapes import ChatShape, CompletionShape, MessagesShape, WireShape
from zerohop.sim.config import ServedModelConfig
from zerohop.sim.engine.engine import Engine
from zerohop.sim.engine.histograms import LagRecorder
from zerohop.sim.sequence import Sequence
from zerohop.sim.serving.http_server import RunNow
from zerohop.sim.serving.response_base import ResponseContext
from zerohop.sim.serving.streams import StreamingResponse

pytestmark = pytest.mark.unit
# thinks for 3 tokens, then calls a tool (the answers of 1 and 2 tokens end inside it)
PLAN = AnswerPlan(3, ToolCallPlan("lookup", "q", 4), word_offset=7)


class _Transport:
    def __init__(self, sink: list[bytes]) -> None:
        self.write = sink.append
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing


class _Conn:
    """What a response uses of `HttpConnection`, recording every byte written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.transport = _Transport(self.written)
        self.closed = False
        self.turns = RunNow()
        self.on_lost: Any = None
        self.finished = 0

    @property
    def writable(self) -> bool:
        return not self.closed and not self.transport.is_closing()

    def start_chunked(self, *_args: object) -> bytes:
        return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def finish(self, close: bool = False) -> None:
        self.finished += 1


class _GroundTruth:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def wall_s(self, perf_ns: int | None) -> float | None:
        return None if perf_ns is None else perf_ns / 1e9


class _Request:
    accepted_ns = 0


class _AlwaysGeneralPath(StreamingResponse):
    def prepare_token(self, seq: Sequence, finished: bool) -> None:
        return None


def _response(
    response_class: type[StreamingResponse], shape: WireShape, target: int, max_tokens: int
) -> tuple[Engine, _Conn, _GroundTruth, LagRecorder]:
    lags = LagRecorder()
    engine = Engine(ServedModelConfig(gpu="h100-sxm", model="llama-3.2-3b"), emission_lag=lags)
    conn, truth = _Conn(), _GroundTruth()
    ctx = ResponseContext(
        conn=conn,  # type: ignore[arg-type]
        request=_Request(),  # type: ignore[arg-type]
        engine=engine,
        shape=shape,
        request_id="req-1",
        model_name="tiny",
        adapter=None,
        word_offset=7,
        fault=None,
        ground_truth=truth,  # type: ignore[arg-type]
        emission_lag=lags,
        keep_token_lags=False,
        extra_headers=[],
    )
    seq_args = {
        "request_id": "req-1",
        "prompt_tokens": 12,
        "target_output": target,
        "max_tokens": max_tokens,
        "arrival_ns": time.perf_counter_ns(),
    }
    response_class(ctx, seq_args).start()
    return engine, conn, truth, lags


def _stream(
    response_class: type[StreamingResponse], shape: WireShape, target: int, max_tokens: int
) -> tuple[bytes, _GroundTruth, LagRecorder]:
    engine, conn, truth, lags = _response(response_class, shape, target, max_tokens)
    now = time.perf_counter_ns()
    while (end := engine.simulate_step(now)) is not None:
        now = end
    assert conn.finished == 1
    return b"".join(conn.written), truth, lags


SHAPES = {
    "chat": lambda: ChatShape("req-1", "tiny", 1_700_000_000, True),
    "completions": lambda: CompletionShape("req-1", "tiny", 1_700_000_000, True),
    "messages": lambda: MessagesShape("req-1", "tiny", 12),
    "chat-thinking-tool": lambda: PlannedChatShape("req-1", "tiny", 1_700_000_000, True, PLAN),
    "messages-thinking-tool": lambda: PlannedMessagesShape("req-1", "tiny", 12, None, PLAN),
}


@pytest.mark.parametrize("api", sorted(SHAPES))
@pytest.mark.parametrize(("target", "max_tokens"), [(1, 1), (2, 2), (5, 9), (120, 120)])
def test_prepared_chunks_are_the_bytes_the_general_path_writes(
    api: str, target: int, max_tokens: int
) -> None:
    fast, fast_truth, fast_lags = _stream(StreamingResponse, SHAPES[api](), target, max_tokens)
    general, _, general_lags = _stream(_AlwaysGeneralPath, SHAPES[api](), target, max_tokens)
    assert fast == general
    assert fast.endswith(b"0\r\n\r\n") and fast.count(b"\r\n0\r\n\r\n") == 1
    assert fast_lags.n == general_lags.n == target  # one lag per token, whichever path
    (record,) = fast_truth.records
    assert record["completion_tokens"] == target
    assert record["finish_reason"] == ("length" if target == max_tokens else "stop")
    assert record["emit_lag_ms"]["n"] == target
    assert record["first_token_ts"] is not None and record["last_token_ts"] is not None


def test_a_token_prepared_for_a_socket_that_closed_meanwhile_is_not_written() -> None:
    engine, conn, _, lags = _response(StreamingResponse, SHAPES["chat"](), 5, 5)
    now = time.perf_counter_ns()
    for _ in range(2):  # prefill + first token, then the second token
        now = engine.simulate_step(now) or now
    written = len(conn.written)
    plan = engine.plan_step(now)
    assert plan is not None and plan.writes[0] is not None
    conn.transport.closing = True  # the client left while the step ran
    engine.finish_step(plan)
    assert len(conn.written) == written and lags.n == 2
