"""The layer under test: an orchestrator hop in its own process in front of an engine.

Per request it does configurable work — wait for a slot (`max_concurrency`, a FIFO
queue), parse the JSON body, apply a policy (read `model`, tag the request),
re-serialise, an async wait (`per_request_ms`, e.g. a remote policy lookup), busy CPU
work (`cpu_ms`, blocking its loop as Python gateway code does) — then forwards it over
a pooled keep-alive upstream connection (as production gateways do) and streams the
response back as bytes arrive, without buffering. Its own cost is reported in
`server-timing: layer;dur=<ms>` (queue + work before forwarding) so the same workload
direct vs. through the layer shows the hop.

`GET /health` is answered by the layer itself; everything else is forwarded.
If the upstream ends a response early (dropped or reset connection), the proxy does
the same to its client, so faults pass through the layer unchanged.

Run: `zerohop proxy --upstream http://127.0.0.1:8000 --port 8001` (or `python -m zerohop.layer`).
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
from zerohop.sim.http_server import HttpConnection, HttpRequest, listen

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
    upstream: str
    host: str = "127.0.0.1"
    port: int = 8001
    per_request_ms: float = 0.0
    cpu_ms: float = 0.0
    parse: bool = True
    reserialise: bool = False
    max_concurrency: int = 0

    def __post_init__(self) -> None:
        split = urlsplit(self.upstream)
        if split.scheme != "http" or not split.hostname or not split.port:
            raise ValueError(f"upstream: expected http://HOST:PORT, got {self.upstream!r}")
        for name in ("per_request_ms", "cpu_ms", "max_concurrency"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0")

    @property
    def upstream_host(self) -> str:
        return urlsplit(self.upstream).hostname or "127.0.0.1"

    @property
    def upstream_port(self) -> int:
        return urlsplit(self.upstream).port or 80


class LayerProxy:
    """The request handler of the proxy's HTTP server."""

    def __init__(self, config: LayerConfig) -> None:
        self.config = config
        self._slots = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        self.forwarded = 0
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

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
        if cfg.parse and body:
            try:
                payload = json.loads(body)
            except ValueError:
                payload = None
            if isinstance(payload, dict):
                tag = _policy(payload)
                if cfg.reserialise:
                    body = json.dumps(payload).encode()
        if cfg.per_request_ms > 0:
            await _precise_sleep(cfg.per_request_ms / 1e3)
        if cfg.cpu_ms > 0:
            _burn_cpu(cfg.cpu_ms / 1e3)
        layer_ms = (time.perf_counter_ns() - request.arrival_ns) / 1e6
        relay = _Relay(conn, layer_ms)
        data = _request_bytes(request, body, cfg, tag)
        pooled = bool(self._idle)
        reader, writer = self._idle.pop() if pooled else (None, None)
        try:
            if reader is None or writer is None:
                reader, writer = await self._connect()
            writer.write(data)
            try:
                reusable = await relay.run(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                if not pooled or relay.started:
                    raise
                writer.close()  # the upstream closed an idle pooled connection: once more
                reader, writer = await self._connect()
                writer.write(data)
                reusable = await relay.run(reader)
            if reusable:
                self._idle.append((reader, writer))
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

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        cfg = self.config
        reader, writer = await asyncio.open_connection(cfg.upstream_host, cfg.upstream_port)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer


class _Relay:
    """Streams one upstream response to the client as its bytes arrive."""

    def __init__(self, conn: HttpConnection, layer_ms: float) -> None:
        self.conn = conn
        self.layer_ms = layer_ms
        self.started = False

    async def run(self, reader: asyncio.StreamReader) -> bool:
        """Relay one response; True when the upstream connection can be reused."""
        conn = self.conn
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        framing, remaining = _framing(lines[1:])
        timing = b"server-timing: layer;dur=%.3f" % self.layer_ms
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


def _request_bytes(request: HttpRequest, body: bytes, cfg: LayerConfig, tag: bytes) -> bytes:
    lines = [
        f"{request.method} {request.target} HTTP/1.1".encode("latin-1"),
        f"host: {cfg.upstream_host}:{cfg.upstream_port}".encode("latin-1"),
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
    print(
        f"zerohop-proxy listening on http://{config.host}:{port} -> {config.upstream}", flush=True
    )
    try:
        await asyncio.Event().wait()
    finally:
        server.close()
