"""The sim's HTTP application: routes, request parsing, admission, and serving.

Routes: POST each registered API's path (api_routes.py: /v1/chat/completions,
/v1/completions, /v1/messages, /v1/responses), /tokenize, the pooling endpoints
(pooling.py: /v1/embeddings, /v1/rerank, /v1/score); GET /v1/models, /health,
/metrics, /version, /zerohop/ground_truth?request_id=ID (or ?last=N), /zerohop/stats; POST
/zerohop/stats/reset (clears the lag recorders, for benchmarks).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerohop.core.records import REPLICA_HEADER, ClockAnchor, http_outcome
from zerohop.sim.answers.answer_plan import draw_answer_plan
from zerohop.sim.answers.api_routes import ApiRoute, api_routes
from zerohop.sim.answers.api_shapes import error_body, models_body
from zerohop.sim.answers.body_forms import body_form
from zerohop.sim.answers.greedy_answer import greedy_answer
from zerohop.sim.answers.request_fields import RequestError, json_body, read_generation_fields
from zerohop.sim.answers.tokenize import TOKENIZE_PATH, tokenize_response
from zerohop.sim.answers.tokens import (
    draw_output_tokens,
    word_offset,
)
from zerohop.sim.config import SimConfig
from zerohop.sim.engine.engine import Engine
from zerohop.sim.engine.engine_stats import engine_stats
from zerohop.sim.engine.histograms import LagRecorder
from zerohop.sim.engine.prefix_cache import peek_cached_tokens, request_block_hashes
from zerohop.sim.faults import FAULT_HEADER, FaultPlan, FaultSpec, parse_fault_header
from zerohop.sim.ground_truth import GroundTruthLog
from zerohop.sim.pd_roles import pd_legs
from zerohop.sim.sequence import EngineError
from zerohop.sim.serving.buffered_response import BufferedResponse
from zerohop.sim.serving.exposition import CONTENT_TYPE as METRICS_CONTENT_TYPE
from zerohop.sim.serving.exposition import render_metrics
from zerohop.sim.serving.http_server import HttpConnection, HttpRequest, listen
from zerohop.sim.serving.pooling import POOLING_PATHS, serve_pooling
from zerohop.sim.serving.response_base import ResponseContext
from zerohop.sim.serving.streams import StreamingResponse

LOOP_PROBE_INTERVAL_S = 0.1


@dataclass(frozen=True)
class _Refusal:
    """What answering a request with an error needs: its connection, the request, the
    API (for the error body's shape), its id and the headers every reply carries."""

    conn: HttpConnection
    request: HttpRequest
    api: str
    request_id: str
    extra_headers: list[tuple[bytes, bytes]]


class SimApp:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.anchor = ClockAnchor.now()
        self.emission_lag = LagRecorder()  # every token: its write time - its step's end
        self.loop_lag = LagRecorder()
        self.engines: list[Engine] = []
        self.routes: dict[str, tuple[Engine, str | None]] = {}
        self.api_routes = api_routes()
        for served in config.models:
            engine = Engine(
                served,
                seed=config.seed,
                max_queue=config.max_queue,
                timer_spin_us=config.timer_spin_us,
                emission_lag=self.emission_lag,
            )
            self.engines.append(engine)
            for name in [engine.name, served.model, *served.aliases]:
                self.routes.setdefault(name, (engine, None))
            for adapter in served.lora.adapters:
                self.routes[adapter.name] = (engine, adapter.name)
        self.ground_truth = GroundTruthLog(config.ground_truth, self.anchor,
                                           keep=config.ground_truth_keep)
        self.faults = FaultPlan(
            {
                k: {"probability": v.probability, **(v.model_extra or {})}
                for k, v in config.faults.items()
            },
            config.seed,
        )
        self.created = int(time.time())
        self._probe: asyncio.TimerHandle | None = None
        self._probe_due_ns = 0
        self._id_prefix = uuid.uuid4().hex[:8]
        self._counter = 0
        # who answered: set to the listening address once bound (`serve`), and sent on
        # every generation reply, so a router's choices are seen per request, not inferred
        self.replica_header: tuple[bytes, bytes] | None = None
        self.bound_port = config.port  # the listening port once bound (`serve`)

    # --- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        for engine in self.engines:
            engine.start()
        self.ground_truth.start()
        self._schedule_probe()

    async def stop(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
        for engine in self.engines:
            await engine.stop()
        await self.ground_truth.close()

    def _schedule_probe(self) -> None:
        """A light periodic timer that measures the loop's own lateness when idle."""
        loop = asyncio.get_running_loop()
        self._probe_due_ns = time.perf_counter_ns() + int(LOOP_PROBE_INTERVAL_S * 1e9)
        self._probe = loop.call_later(LOOP_PROBE_INTERVAL_S, self._on_probe)

    def _on_probe(self) -> None:
        lag = time.perf_counter_ns() - self._probe_due_ns
        self.loop_lag.add_ns(max(0, lag))
        self._schedule_probe()

    # --- routing ---------------------------------------------------------------------
    def handle(self, conn: HttpConnection, request: HttpRequest) -> None:
        path = request.path
        route = self.api_routes.get(path)
        if route is not None:
            if request.method != "POST":
                conn.send(405, error_body(route.form, 405, "Method Not Allowed"))
                return
            self._generate(conn, request, route)
            return
        if path in POOLING_PATHS and request.method == "POST":
            return self._pool(conn, request)
        if path == TOKENIZE_PATH and request.method == "POST":
            conn.send(*tokenize_response(request.body, self.routes, self.engines[0]))
            return
        if request.method not in ("GET", "HEAD") and not path.startswith("/zerohop/"):
            conn.send(405, error_body("chat", 405, "Method Not Allowed"))
            return
        if path in ("/health", "/ping"):
            conn.send(200, b"", b"text/plain; charset=utf-8")
        elif path == "/v1/models":
            conn.send(200, self._models())
        elif path == "/metrics":
            body = render_metrics(self.engines, self.loop_lag, self.emission_lag)
            conn.send(200, body, METRICS_CONTENT_TYPE)
        elif path == "/version":
            conn.send(200, b'{"version":"zerohop-sim"}')
        elif path == "/zerohop/ground_truth":
            self._ground_truth(conn, request)
        elif path == "/zerohop/stats":
            conn.send(200, json.dumps(self.stats()).encode())
        elif path == "/zerohop/stats/reset" and request.method == "POST":
            self.emission_lag.reset()
            self.loop_lag.reset()
            for engine in self.engines:
                engine.wake_lag.reset()
            conn.send(200, b"{}")
        else:
            conn.send(404, error_body("chat", 404, f"Not Found: {path}"))

    def stats(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "emission_lag": self.emission_lag.summary_ms(),
            "loop_lag": self.loop_lag.summary_ms(),
            "ground_truth_records": self.ground_truth.count,
            "engines": [engine_stats(e) for e in self.engines],
        }

    def _models(self) -> bytes:
        entries: list[tuple[str, str | None, int]] = []
        for engine in self.engines:
            entries.append((engine.name, None, engine.max_model_len))
            for adapter in engine.config.lora.adapters:
                entries.append((adapter.name, engine.name, engine.max_model_len))
        return models_body(entries, self.created)

    def _ground_truth(self, conn: HttpConnection, request: HttpRequest) -> None:
        request_id = request.query.get("request_id")
        if request_id is not None:
            record = self.ground_truth.get(request_id)
            if record is None:
                conn.send(404, b'{"error":"no ground truth for that request_id (yet)"}')
            else:
                conn.send(200, json.dumps(record).encode())
            return
        try:
            last = int(request.query.get("last", "100"))
        except ValueError:
            last = 100
        conn.send(200, json.dumps(self.ground_truth.last(last)).encode())

    # --- generation ---------------------------------------------------------------
    def _new_request_id(self) -> str:
        self._counter += 1
        return f"{self._id_prefix}{self._counter:08x}"

    def _reply_ids(self, request: HttpRequest) -> tuple[str, list[tuple[bytes, bytes]]]:
        """The request's id (the client's, else a new one) and the headers every reply has."""
        request_id = request.headers.get("x-request-id") or self._new_request_id()
        extra_headers = [(b"x-request-id", request_id.encode("latin-1", "replace"))]
        if self.replica_header is not None:
            extra_headers.append(self.replica_header)
        return request_id, extra_headers

    def _pool(self, conn: HttpConnection, request: HttpRequest) -> None:
        """Embeddings, rerank, score (pooling.py), behind the generation routes' key."""
        request_id, extra_headers = self._reply_ids(request)
        try:
            self._check_auth(request, "chat")
        except RequestError as err:
            conn.send(err.status, error_body("chat", err.status, err.message),
                      extra_headers=extra_headers)
            return
        serve_pooling(conn, request, routes=self.routes, request_id=request_id,
                      extra_headers=extra_headers)

    def _generate(self, conn: HttpConnection, request: HttpRequest,
                  api_route: ApiRoute) -> None:
        api = api_route.form
        request_id, extra_headers = self._reply_ids(request)
        refused = _Refusal(conn, request, api, request_id, extra_headers)
        try:
            self._check_auth(request, api)
            fault = self._fault_for(request, request_id)
            body = json_body(request.body)
            model_name = body.get("model")
            if not isinstance(model_name, str) or not model_name:
                raise RequestError(400, "`model` is required")
            route = self.routes.get(model_name)
            if route is None:
                raise RequestError(404, f"The model `{model_name}` does not exist.")
            engine, adapter = route
            prompt_tokens, max_tokens, stream, include_usage, ignore_eos, min_tokens = (
                read_generation_fields(api, body, engine.max_model_len)
            )
        except RequestError as err:
            self._reject(refused, err.status, err.message, err.error_type, model=None)
            return
        if fault is not None and fault.status is not None:
            self._http_fault(refused, fault, model_name)
            return
        if fault is not None and fault.name == "reset" and fault.integer("after") == 0:
            self._reject_record(
                request, api, request_id, model_name, "incomplete_stream", 0, None, fault
            )
            conn.reset()
            return
        try:
            engine.check_request(prompt_tokens, max_tokens, adapter)
        except EngineError as err:
            self._reject(refused, err.status, err.message, None, model=model_name)
            return
        if engine.queue_full():
            status = body_form(api).overload_status
            self._reject(refused, status, "The server is overloaded: the waiting queue is full.",
                         None, model=model_name)
            engine.stats.rejected_total += 1
            return
        ignore = ignore_eos or engine.engine_config.ignore_eos_default
        greedy = greedy_answer(api, body)  # seeded temperature 0: words from the prompt
        offset = greedy.offset if greedy is not None else word_offset(request_id)
        answer = draw_answer_plan(api, body, reasoning=self.config.reasoning,
                                  tool_calls=self.config.tool_calls, seed=self.config.seed,
                                  request_id=request_id, word_offset=offset,
                                  structured=self.config.structured_output)
        drawn = draw_output_tokens(
            max_tokens=max_tokens, ignore_eos=ignore, min_tokens=min_tokens,
            seed=self.config.seed, request_id=greedy.key if greedy is not None else request_id,
            eos_median_tokens=engine.engine_config.eos_median_tokens,
            eos_sigma=engine.engine_config.eos_sigma,
        )
        target = answer.output_tokens(drawn, max_tokens=max_tokens, ignore_eos=ignore,
                                      min_tokens=min_tokens)
        if greedy is not None and (engine.running or engine.waiting):  # batched: may diverge
            greedy = greedy.diverged(target, share=self.config.answer_divergence,
                                     sim_seed=self.config.seed)
        hashes = request_block_hashes(engine.prefix_cache, api, body, prompt_tokens, adapter)
        cached = (peek_cached_tokens(engine.prefix_cache, hashes, prompt_tokens)
                  if body_form(api).reports_cached_tokens else None)
        shape = api_route.make_shape(answer, request_id=request_id, model=model_name,
                                     include_usage=include_usage,
                                     prompt_tokens=prompt_tokens, cached_tokens=cached,
                                     word_offset=offset, max_tokens=max_tokens)
        ctx = ResponseContext(
            conn=conn,
            request=request,
            engine=engine,
            shape=shape,
            request_id=request_id,
            model_name=model_name,
            adapter=adapter,
            word_offset=offset,
            greedy=greedy,
            fault=fault,
            ground_truth=self.ground_truth,
            emission_lag=self.emission_lag,
            keep_token_lags=self.config.ground_truth_token_lags,
            extra_headers=extra_headers,
            **pd_legs(self.config.pd.role, body, stream=stream, prompt_tokens=prompt_tokens,
                      kv_bytes_per_token=engine.model.kv_bytes_per_token,
                      bandwidth_gbps=self.config.pd.kv_bandwidth_gbps,
                      latency_ms=self.config.pd.kv_latency_ms, engine_id=self._id_prefix,
                      host=self.config.host, port=self.bound_port),
        )
        seq_args = {
            "request_id": request_id,
            "prompt_tokens": prompt_tokens,
            "target_output": target,
            "max_tokens": max_tokens,
            "arrival_ns": request.arrival_ns,
            "adapter": adapter,
            "block_hashes": hashes,
        }
        response = (StreamingResponse if stream else BufferedResponse)(ctx, seq_args)
        response.start()

    def _check_auth(self, request: HttpRequest, api: str) -> None:
        key = self.config.api_key
        if key is None:
            return
        given = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        if given != key:
            raise RequestError(401, "invalid or missing API key")

    def _fault_for(self, request: HttpRequest, request_id: str) -> FaultSpec | None:
        header = request.headers.get(FAULT_HEADER)
        if header:
            try:
                return parse_fault_header(header)
            except ValueError as exc:
                raise RequestError(400, str(exc)) from None
        return self.faults.draw(request_id)

    def _http_fault(self, refused: _Refusal, fault: FaultSpec, model_name: str) -> None:
        conn, api = refused.conn, refused.api
        status = fault.status or 500
        headers = list(refused.extra_headers)
        if status == 429 or ("retry_after" in fault.params and status in (503, 529)):
            headers.append((b"retry-after", str(fault.integer("retry_after")).encode()))
        if fault.no_body:
            body = (
                b"<html><head><title>%d</title></head><body><center><h1>%d</h1></center>"
                b"<hr><center>zerohop-sim</center></body></html>" % (status, status)
            )
            conn.send(status, body, b"text/html", headers)
        else:
            message = f"injected fault {fault.name}"
            conn.send(status, error_body(api, status, message), extra_headers=headers)
        self._reject_record(refused.request, api, refused.request_id, model_name,
                            http_outcome(status), status, None, fault)

    def _reject(
        self, refused: _Refusal, status: int, message: str, error_type: str | None,
        model: str | None,
    ) -> None:
        refused.conn.send(status, error_body(refused.api, status, message, error_type),
                          extra_headers=refused.extra_headers)
        self._reject_record(refused.request, refused.api, refused.request_id, model,
                            http_outcome(status), status, error_type, None)

    def _reject_record(
        self,
        request: HttpRequest,
        api: str,
        request_id: str,
        model: str | None,
        outcome: str,
        status: int,
        error_type: str | None,
        fault: FaultSpec | None,
    ) -> None:
        gt = self.ground_truth
        gt.add(
            {
                "request_id": request_id,
                "api": api,
                "model": model,
                "adapter": None,
                "stream": None,
                "accepted_ts": gt.wall_s(request.accepted_ns),
                "arrival_ts": gt.wall_s(request.arrival_ns),
                "first_token_ts": None,
                "last_token_ts": None,
                "scheduled_first_token_ts": None,
                "prompt_tokens": None,
                "completion_tokens": 0,
                "max_tokens": None,
                "outcome": outcome,
                "http_status": status,
                "error_type": error_type,
                "finish_reason": None,
                "fault": fault.header_value() if fault else None,
                "server_ttft_ms": None,
                "server_e2e_ms": None,
                "queue_ms": None,
                "preemptions": 0,
                "max_emission_lag_ms": None,
                "emit_lag_ms": None,
            }
        )


async def serve(
    config: SimConfig, port_file: Path | None = None, ready: asyncio.Future[int] | None = None
) -> None:
    """Run the sim until cancelled. Writes the bound port to `port_file` (atomically)
    once the socket listens, and prints `zerohop-sim listening on URL` to stdout."""
    app = SimApp(config)
    await app.start()
    # The hot path allocates many short-lived tuples; the default thresholds would run
    # generation-2 collections (milliseconds, all objects) in the middle of write bursts.
    # Requests leave no reference cycles (tests/sim/test_no_cycles.py), so the rare
    # collections find little to free.
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)
    server, port = await listen(app, config.host, config.port, port_file)
    name = f"{config.host}:{port}".encode("latin-1", "replace")
    app.replica_header = (REPLICA_HEADER.encode(), name)
    app.bound_port = port
    print(f"zerohop-sim listening on http://{config.host}:{port}", flush=True)
    if ready is not None and not ready.done():
        ready.set_result(port)
    try:
        await asyncio.Event().wait()
    finally:
        server.close()
        await app.stop()
