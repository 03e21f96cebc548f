"""The layer under test: an orchestrator hop in its own process in front of an engine.

Per request it does configurable work — wait for a slot (`max_concurrency`, a FIFO
queue), parse the JSON body, apply a policy (read `model`, tag the request),
re-serialise, an async wait (`per_request_ms`, e.g. a remote policy lookup; and
`delay_ms` more for `delay_percent` % of requests: a cost in the tail only, the pricing
control of docs/layers.md), busy CPU work (`cpu_ms`, blocking its loop as Python
gateway code does) — then forwards it over
a pooled keep-alive upstream connection (as production gateways do) and streams the
response back as bytes arrive, without buffering. Its own cost is reported in
`server-timing: layer;dur=<ms>` (queue + work before forwarding) so the same workload
direct vs. through the layer shows the hop.

In front of several upstreams (engine replicas, `--upstream` repeated) it routes each
request by a policy (`routing.py`: round robin, least loaded, prefix affinity) and says
which one it chose in the same header: `server-timing: layer;dur=5.1, route;desc="r1"`
(r<i>: the i-th upstream given, from 0). Each upstream has its own connection pool.

`GET /health` is answered by the layer itself; everything else is forwarded.
If the upstream ends a response early (dropped or reset connection), the proxy does
the same to its client, so faults pass through the layer unchanged.

Run: `zerohop proxy --upstream http://127.0.0.1:8000 --port 8001` (or `python -m zerohop.proxy`);
`zerohop proxy --upstream URL1 --upstream URL2 --route prefix_affinity` routes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from zerohop.core.http_chunked import ChunkedDecoder
from zerohop.proxy.routing import ROUTES, make_router
from zerohop.sim.serving.http_server import HttpConnection, HttpRequest, listen

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "host",
}
READ_SIZE = 65536


@dataclass(frozen=True)
class LayerConfig:
    upstreams: tuple[str, ...]
    route: str = "round_robin"
    host: str = "127.0.0.1"
    port: int = 8001
    per_request_ms: float = 0.0
    cpu_ms: float = 0.0
    parse: bool = True
    reserialise: bool = False
    max_concurrency: int = 0
    delay_ms: float = 0.0  # an extra wait for `delay_percent` % of requests: a tail only
    delay_percent: float = 0.0

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ValueError("upstream: at least one is needed")
        for upstream in self.upstreams:
            split = urlsplit(upstream)
            if split.scheme != "http" or not split.hostname or not split.port:
                raise ValueError(f"upstream: expected http://HOST:PORT, got {upstream!r}")
        if self.route not in ROUTES:
            raise ValueError(f"route: {self.route!r} unknown; choose one of {', '.join(ROUTES)}")
        if self.route == "prefix_affinity" and not self.parse:
            raise ValueError("route prefix_affinity reads the prompt: not with --no-parse")
        for name in ("per_request_ms", "cpu_ms", "max_concurrency", "delay_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0")
        if not 0 <= self.delay_percent <= 100:
            raise ValueError(f"delay_percent: must be within 0..100, got {self.delay_percent}")

    def address(self, index: int) -> tuple[str, int]:
        """(host, port) of upstream `index`."""
        split = urlsplit(self.upstreams[index])
        return split.hostname or "127.0.0.1", split.port or 80


class LayerProxy:
    """The request handler of the proxy's HTTP server."""

    def __init__(self, config: LayerConfig) -> None:
        self.config = config
        self._slots = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        self.forwarded = 0
        self._arrivals = 0  # requests counted for the delayed share
        self.router = make_router(config.route, len(config.upstreams))
        self._addresses = [config.address(i) for i in range(len(config.upstreams))]
        self._idle: list[list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = [
            [] for _ in config.upstreams
        ]

    def handle(self, conn: HttpConnection, request: HttpRequest) -> None:
        if request.path == "/health" and request.method == "GET":
            conn.send(200, b"", b"text/plain; charset=utf-8")  # the layer's own liveness
            return
        task = asyncio.get_running_loop().create_task(self._forward(conn, request))

        def client_gone() -> None:
            if not task.done():
                task.cancel()

        conn.on_lost = client_gone

    async def _forward(self, conn: HttpConnection, request: HttpRequest) -> None:
        if self._slots is None:
            await self._forward_now(conn, request)
            return
        async with self._slots:
            await self._forward_now(conn, request)

    async def _forward_now(self, conn: HttpConnection, request: HttpRequest) -> None:
        cfg = self.config
        body = request.body
        tag = b""
        payload = None
        if cfg.parse and body:
            try:
                payload = json.loads(body)
            except ValueError:
                payload = None
            if isinstance(payload, dict):
                tag = _policy(payload)
                if cfg.reserialise:
                    body = json.dumps(payload).encode()
        index = self.router.choose(payload if isinstance(payload, dict) else None)
        self.router.load.started(index)
        try:
            await self._work_and_relay(conn, request, body, tag, index)
        finally:
            self.router.load.finished(index)

    async def _work_and_relay(
        self, conn: HttpConnection, request: HttpRequest, body: bytes, tag: bytes, index: int
    ) -> None:
        cfg = self.config
        if cfg.per_request_ms > 0:
            await _precise_sleep(cfg.per_request_ms / 1e3)
        if cfg.delay_ms > 0 and self._delay_this_one():
            await _precise_sleep(cfg.delay_ms / 1e3)
        if cfg.cpu_ms > 0:
            _burn_cpu(cfg.cpu_ms / 1e3)
        layer_ms = (time.perf_counter_ns() - request.arrival_ns) / 1e6
        route = index if len(cfg.upstreams) > 1 else None
        relay = _Relay(conn, layer_ms, route)
        data = _request_bytes(request, body, self._addresses[index], tag)
        idle = self._idle[index]
        pooled = bool(idle)
        reader, writer = idle.pop() if pooled else (None, None)
        try:
            if reader is None or writer is None:
                reader, writer = await self._connect(index)
            writer.write(data)
            try:
                reusable = await relay.run(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                if not pooled or relay.started:
                    raise
                writer.close()  # the upstream closed an idle pooled connection: once more
                reader, writer = await self._connect(index)
                writer.write(data)
                reusable = await relay.run(reader)
            if reusable:
                idle.append((reader, writer))
                writer = None
        except (ConnectionError, OSError, asyncio.IncompleteReadError) as exc:
            if not relay.started:
                message = f"upstream unavailable: {exc}".encode()
                conn.send(502, message, b"text/plain; charset=utf-8")
            else:
                conn.reset()
        finally:
            self.forwarded += 1
            if writer is not None:
                writer.close()

    def _delay_this_one(self) -> bool:
        """Exactly `delay_percent` % of requests, spread evenly: the i-th is delayed when
        the running count of delayed ones, i·k/100 rounded down, steps up."""
        i = self._arrivals
        self._arrivals += 1
        share = self.config.delay_percent / 100.0
        return int((i + 1) * share) > int(i * share)

    async def _connect(self, index: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(*self._addresses[index])
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer


class _Relay:
    """Streams one upstream response to the client as its bytes arrive."""

    def __init__(self, conn: HttpConnection, layer_ms: float, route: int | None = None) -> None:
        self.conn = conn
        self.layer_ms = layer_ms
        self.route = route  # the upstream chosen, when there was a choice
        self.started = False

    async def run(self, reader: asyncio.StreamReader) -> bool:
        """Relay one response; True when the upstream connection can be reused."""
        conn = self.conn
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        framing, remaining = _framing(lines[1:])
        timing = b"server-timing: layer;dur=%.3f" % self.layer_ms
        if self.route is not None:
            timing += b', route;desc="r%d"' % self.route
        self.started = True
        conn.write(b"\r\n".join([*lines, timing]) + b"\r\n\r\n")
        decoder = ChunkedDecoder() if framing == "chunked" else None
        complete = framing == "length" and remaining <= 0
        while not complete:
            try:
                data = await reader.read(READ_SIZE)
            except ConnectionResetError:
                conn.reset()
                return False
            if not data:
                break
            conn.write(data)
            if framing == "length":
                remaining -= len(data)
                complete = remaining <= 0
            elif decoder is not None:
                try:
                    decoder.feed(data)
                except ValueError:
                    break
                complete = decoder.done
        conn.finish(close=not complete)
        keep_alive = not any(line.lower().startswith(b"connection: close") for line in lines)
        return complete and keep_alive


def _policy(payload: dict[str, object]) -> bytes:
    """What a gateway decides per request: here, the route (model) it forwards to."""
    model = payload.get("model")
    route = model if isinstance(model, str) else "default"
    return b"x-zerohop-route: " + route.encode("utf-8", "replace")[:200] + b"\r\n"


def _request_bytes(request: HttpRequest, body: bytes, address: tuple[str, int],
                   tag: bytes) -> bytes:
    lines = [
        f"{request.method} {request.target} HTTP/1.1".encode("latin-1"),
        f"host: {address[0]}:{address[1]}".encode("latin-1"),
    ]
    for name, value in request.headers.items():
        if name not in HOP_BY_HOP:
            lines.append(f"{name}: {value}".encode("latin-1", "replace"))
    lines.append(b"content-length: %d" % len(body))
    lines.append(b"connection: keep-alive")
    return b"\r\n".join(lines) + b"\r\n" + tag + b"\r\n" + body


def _framing(header_lines: list[bytes]) -> tuple[str, int]:
    for line in header_lines:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"transfer-encoding" and b"chunked" in value.lower():
            return "chunked", 0
        if key == b"content-length":
            return "length", int(value.strip() or b"0")
    return "close", 0


async def _precise_sleep(seconds: float) -> None:
    """asyncio.sleep, but not late: libuv's timers count whole milliseconds from a loop
    time cached at the start of the iteration, so they fire up to ~2 ms late; sleep to
    2 ms before the end on the timer, then yield to the loop until the deadline."""
    deadline = time.perf_counter() + seconds
    if seconds > 0.002:
        await asyncio.sleep(seconds - 0.002)
    while time.perf_counter() < deadline:
        await asyncio.sleep(0)


def _burn_cpu(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def serve_proxy(config: LayerConfig, port_file: Path | None = None) -> None:
    server, port = await listen(LayerProxy(config), config.host, config.port, port_file,
                                one_per_turn=False)
    upstreams = ", ".join(config.upstreams)
    routed = f" ({config.route})" if len(config.upstreams) > 1 else ""
    print(f"zerohop-proxy listening on http://{config.host}:{port} -> {upstreams}{routed}",
          flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        server.close()
