"""The streaming hot path writes chunks built ahead of time; they must be the very bytes
the general path builds at the token, for every API shape, answer length and finish
reason, and each token's lag must be noted once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from zerohop.sim.api_shapes import ChatShape, CompletionShape, MessagesShape, WireShape
from zerohop.sim.config import ServedModelConfig
from zerohop.sim.engine import Engine, Sequence
from zerohop.sim.http_server import RunNow
from zerohop.sim.streams import EmissionLog, ResponseContext, StreamingResponse

pytestmark = pytest.mark.unit


class _Transport:
    def __init__(self, sink: list[bytes]) -> None:
        self.write = sink.append


class _Conn:
    """What a response uses of `HttpConnection`, recording every byte written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.transport = _Transport(self.written)
        self.closed = False
        self.turns = RunNow()
        self.on_lost: Any = None
        self.finished = 0

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
    def on_token(self, seq: Sequence, scheduled_ns: int, finished: bool) -> None:
        self._on_token_slow(seq, scheduled_ns, finished)


def _stream(
    response_class: type[StreamingResponse], shape: WireShape, target: int, max_tokens: int
) -> tuple[bytes, _GroundTruth, EmissionLog]:
    log = EmissionLog()
    engine = Engine(ServedModelConfig(gpu="h100-sxm", model="llama-3.2-3b"), after_writes=log.flush)
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
        emission=log,
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
    now = time.perf_counter_ns()
    while (end := engine.simulate_step(now)) is not None:
        now = end
    assert conn.finished == 1
    return b"".join(conn.written), truth, log


SHAPES = {
    "chat": lambda: ChatShape("req-1", "tiny", 1_700_000_000, True),
    "completions": lambda: CompletionShape("req-1", "tiny", 1_700_000_000, True),
    "messages": lambda: MessagesShape("req-1", "tiny", 12),
}


@pytest.mark.parametrize("api", sorted(SHAPES))
@pytest.mark.parametrize(("target", "max_tokens"), [(1, 1), (2, 2), (5, 9), (120, 120)])
def test_prebuilt_chunks_are_the_bytes_the_general_path_writes(
    api: str, target: int, max_tokens: int
) -> None:
    fast, fast_truth, fast_log = _stream(StreamingResponse, SHAPES[api](), target, max_tokens)
    general, _, _ = _stream(_AlwaysGeneralPath, SHAPES[api](), target, max_tokens)
    assert fast == general
    assert fast.endswith(b"0\r\n\r\n") and fast.count(b"\r\n0\r\n\r\n") == 1
    assert fast_log.recorder.n == target  # one lag per token, whichever path wrote it
    assert not fast_log.written
    (record,) = fast_truth.records
    assert record["completion_tokens"] == target
    assert record["finish_reason"] == ("length" if target == max_tokens else "stop")
    assert record["emit_lag_ms"]["n"] == target
    assert record["first_token_ts"] is not None and record["last_token_ts"] is not None
