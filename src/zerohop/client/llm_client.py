"""One measured request, start to record: build it, stream it, time it, keep it.

`LLMClient` is transport plus bookkeeping and nothing else: connection reuse (keep-alive
like real clients), the timeouts, and turning the raw exchange into a RequestRecord. It
knows nothing of Locust; the Locust users call it and fire Locust's events.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zerohop.client.http_stream import END_RESET, RawExchange, Reactor, Timeouts, stream_request
from zerohop.client.measure import StreamDecode, build_record
from zerohop.client.pooling_request import PooledBody, build_pooled_request, fill_pooled_record
from zerohop.client.protocols import ApiAdapter, GenerationRequest, HttpRequest, StreamedToolCall
from zerohop.client.structured_output import judge_answer
from zerohop.core import records as rec
from zerohop.core import timing
from zerohop.core.records import ClockAnchor, RequestRecord

FirstContent = Callable[[bool], None]  # told once: content (True), or an end before any


def process_tag() -> str:
    """`host:pid` of the measuring process (by pid: Locust forks workers after import)."""
    return _tag_of(os.getpid())


@functools.lru_cache(maxsize=4)
def _tag_of(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}"  # a system call: once per process, not per request


YIELD_EVERY_NS = 100_000


def cooperative_sleep0() -> Callable[[], None]:
    """gevent.sleep(0) when running under gevent (Locust), else a no-op."""
    try:
        import gevent
    except ImportError:
        return lambda: None
    return lambda: gevent.sleep(0)


@dataclass
class RequestSpec:
    """What to send and how to label it (the workload planner's output, API-neutral)."""

    workload: str
    generation: GenerationRequest
    adapter: str | None = None  # the LoRA adapter asked for (the API's is LLMClient.api_adapter)
    target_input_tokens: int | None = None
    scheduled_perf_ns: int | None = None
    # an open loop under --max-concurrency: how long the arrival waited for a slot
    # (its schedule lag counts from the slot, its latencies from schedule from the plan)
    queue_wait_ns: int | None = None
    logical_request_id: str | None = None
    attempt: int = 1
    prompt_token_source: str | None = None  # which method sized the prompt
    prompt_clamped: bool | None = None  # a size the tokenizer cannot make: the nearest sent
    session_id: str | None = None  # a conversation's session and turn, for the record
    turn: int | None = None
    # a list: each attempt's answer text (thinking left out) replaces what it holds,
    # so a conversation can send the answer back as history
    answer: list[str] | None = None
    # an agent loop's model call: its step (1, 2, ...) and the loop's cap, for the record
    # (`agent_step`, and `agent_end` on the loop's last call); and a list that each
    # attempt's tool calls (id, name, arguments as streamed) replace, to send back
    agent_step: int | None = None
    agent_max_steps: int | None = None
    tool_calls: list[StreamedToolCall] | None = None
    # an interleaved comparison's arm (`client.arms`): which of the client's base URLs
    # the request goes to; None: its one base URL
    arm: str | None = None
    # structured output: the JSON schema the answer is judged against (the request
    # carries it in `generation.response_format`); None: no judgement
    response_schema: dict[str, Any] | None = None
    # a pooling request (embeddings, rerank): sent as this body, not as `generation`
    pooled: PooledBody | None = None


class LLMClient:
    """Measures requests against one base URL with one API adapter (or, in an
    interleaved comparison, one base URL per arm, each with its own kept connections)."""

    def __init__(
        self,
        base_url: str,
        api_adapter: ApiAdapter,
        *,
        api_key: str | None,
        timeouts: Timeouts,
        anchor: ClockAnchor,
        id_prefix: str | None = None,
        reactor: Reactor | None = None,
        arm_urls: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.arm_urls = {arm: url.rstrip("/") for arm, url in (arm_urls or {}).items()}
        self.api_adapter = api_adapter
        self._api_key = api_key
        self.timeouts = timeouts
        self.anchor = anchor
        self._idle: dict[str, list[socket.socket]] = {}
        self._ids = itertools.count(1)
        self._prefix = id_prefix or f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self._last_yield_ns = 0
        self._reactor = reactor
        self._sleep0 = cooperative_sleep0()

    def __repr__(self) -> str:  # never show the key
        return f"LLMClient({self.base_url!r}, api={self.api_adapter.name!r})"

    def _pause(self) -> None:
        """Every ~100 µs of decoding (see measure.build_record): read what the other
        streams received meanwhile, then yield to the other greenlets."""
        now = time.perf_counter_ns()
        if now - self._last_yield_ns > YIELD_EVERY_NS:
            if self._reactor is not None:
                self._reactor.pump()
            self._sleep0()
            self._last_yield_ns = time.perf_counter_ns()

    def new_request_id(self) -> str:
        return f"{self._prefix}-{next(self._ids)}"

    def execute(self, spec: RequestSpec, *, request_id: str | None = None,
                on_first_content: FirstContent | None = None) -> RequestRecord:
        """Send, stream, measure. Never raises for anything the target does; a greenlet
        killed mid-request (end of run) raises GreenletExit after recording `cancelled`
        through `cancelled_record` in the caller. `on_first_content(content)` is called
        once, as the stream's first content arrives (True) or its error or end before
        any (False): the load generator's live saturation feed."""
        rid = request_id or self.new_request_id()
        record = spec_record(spec, rid, self.api_adapter.name)
        if spec.pooled is not None:
            return self._execute_pooled(spec, spec.pooled, record)
        # structured output is judged on the answer's text: collect it even when the
        # caller keeps none (a conversation keeps its own, for the next turn's history)
        answer = spec.answer if spec.answer is not None or spec.response_schema is None else []
        if answer is not None:
            answer.clear()
        if spec.tool_calls is not None:
            spec.tool_calls.clear()
        http_request = self.api_adapter.build_request(
            spec.generation, api_key=self._api_key, request_id=rid, stream=True
        )
        collect_calls = spec.tool_calls is not None
        exchange, scan = self._exchange(
            http_request, self.url_of(spec.arm),
            lambda: StreamDecode(self.api_adapter, answer=answer, collect_calls=collect_calls),
            on_first_content)
        build_record(
            record, exchange, self.api_adapter, self.anchor,
            scheduled_perf_ns=spec.scheduled_perf_ns, queue_wait_ns=spec.queue_wait_ns,
            pause=self._pause, answer=answer,
            tool_calls=spec.tool_calls, scan=scan,
        )
        if spec.response_schema is not None and answer is not None and record.outcome == rec.OK:
            record.structured_output = judge_answer("".join(answer), spec.response_schema)
        if spec.agent_step is not None and spec.agent_max_steps is not None:
            record.agent_end = rec.agent_loop_end(
                ok=record.outcome == rec.OK, tool_calls=record.tool_calls or 0,
                step=spec.agent_step, max_steps=spec.agent_max_steps)
        return record

    def _execute_pooled(self, spec: RequestSpec, body: PooledBody, record: RequestRecord
                        ) -> RequestRecord:
        """A pooling request: one JSON body each way, on the same client and clock."""
        http_request = build_pooled_request(body, api_key=self._api_key,
                                            request_id=record.request_id)
        exchange, _ = self._exchange(http_request, self.url_of(spec.arm), lambda: None)
        return fill_pooled_record(record, exchange, body, self.anchor,
                                  scheduled_perf_ns=spec.scheduled_perf_ns,
                                  queue_wait_ns=spec.queue_wait_ns)

    def url_of(self, arm: str | None) -> str:
        """The base URL of `arm` (None: the client's own); an arm without one is a bug
        of the caller, not something the target did."""
        if arm is None:
            return self.base_url
        try:
            return self.arm_urls[arm]
        except KeyError:
            raise ValueError(f"no base URL for arm {arm!r}") from None

    def _exchange(self, http_request: HttpRequest, base_url: str,
                  new_scan: Callable[[], StreamDecode | None],
                  on_first_content: FirstContent | None = None
                  ) -> tuple[RawExchange, StreamDecode | None]:
        """Stream one request; its decoding was fed the reads up to the first content
        (no decoding: a body that is not a stream, whose first read is its content)."""
        idle = self._idle.setdefault(base_url, [])
        sock = idle.pop() if idle else None
        reused = sock is not None
        scan = new_scan()
        exchange, keep = stream_request(
            base_url, http_request, self.timeouts,
            first_content=_watched(scan, on_first_content),
            sock=sock, reactor=self._reactor,
        )
        if reused and exchange.end == END_RESET and exchange.status is None:
            # the server closed an idle keep-alive connection: one fresh try, as clients do
            scan = new_scan()
            exchange, keep = stream_request(
                base_url, http_request, self.timeouts,
                first_content=_watched(scan, on_first_content),
                reactor=self._reactor,
            )
        if keep is not None:
            idle.append(keep)
        return exchange, scan

    def close(self) -> None:
        for idle in self._idle.values():
            while idle:
                with contextlib.suppress(OSError):
                    idle.pop().close()


def _watched(scan: StreamDecode | None, on_first_content: FirstContent | None
             ) -> Callable[[int, bytes], bool] | None:
    """The stream's first-content detector, telling `on_first_content` when it fires (it
    is fed reads only until then, so the call costs nothing after)."""
    if scan is None or on_first_content is None:
        return None if scan is None else scan.feed_early

    def feed(ts: int, payload: bytes) -> bool:
        seen = scan.feed_early(ts, payload)
        if seen:
            on_first_content(bool(scan.out.content_ns))
        return seen
    return feed


def spec_record(spec: RequestSpec, request_id: str, api: str) -> RequestRecord:
    """An attempt's record before it is sent: what its spec says. A measured request
    (`LLMClient.execute`) and one the end of the run cut off (`cancelled_record`) both
    start from it, so the two carry the same identity fields."""
    return RequestRecord(
        request_id=request_id, workload=spec.workload, api=api, model=spec.generation.model,
        adapter=spec.adapter, worker=process_tag(),
        target_input_tokens=spec.target_input_tokens,
        images=len(spec.generation.images) or None,
        image_tokens=sum(image.tokens for image in spec.generation.images) or None,
        prompt_token_source=spec.prompt_token_source, prompt_clamped=spec.prompt_clamped,
        max_tokens=None if spec.pooled is not None else spec.generation.max_tokens,
        items=None if spec.pooled is None else spec.pooled.items,
        logical_request_id=spec.logical_request_id or request_id, attempt=spec.attempt,
        session_id=spec.session_id, turn=spec.turn, agent_step=spec.agent_step, arm=spec.arm,
        queue_wait_ms=(None if spec.queue_wait_ns is None
                       else timing.ms_between(0, spec.queue_wait_ns)),
    )


def cancelled_record(spec: RequestSpec, request_id: str, api: str, anchor: ClockAnchor,
                     sent_perf_ns: int | None) -> RequestRecord:
    """The record of a request cut off by the end of the run: kept, never dropped."""
    record = spec_record(spec, request_id, api)
    record.outcome = rec.CANCELLED
    if sent_perf_ns is not None:
        record.sent_ts = anchor.wall_s(sent_perf_ns)
    record.end_ts = anchor.wall_s(time.perf_counter_ns())
    if spec.scheduled_perf_ns is not None:
        record.scheduled_ts = anchor.wall_s(spec.scheduled_perf_ns)
        if sent_perf_ns is not None:
            record.schedule_lag_ms = timing.schedule_lag_ms(
                spec.scheduled_perf_ns, sent_perf_ns, spec.queue_wait_ns)
    return record
