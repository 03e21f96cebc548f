"""A small HTTP/1.1 server on `asyncio.Protocol`: byte-level control for the faults.

Supports keep-alive, pipelined requests (answered in order), Content-Length request
bodies, and responses that are either Content-Length or chunked. The request's arrival
time is stamped when `data_received` is entered with its last bytes — as early as the
stack allows. The connection parses and hands complete requests to a `RequestHandler`
one per loop turn (see `OnePerTurn`); the handler answers through the `HttpConnection`
methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Site Overloaded",
}


@dataclass(slots=True)
class HttpRequest:
    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes
    arrival_ns: int  # perf_counter_ns when the last byte was read
    accepted_ns: int  # perf_counter_ns when the connection was accepted
    keep_alive: bool


class RequestHandler(Protocol):
    def handle(self, conn: HttpConnection, request: HttpRequest) -> None: ...


class HttpDate:
    """The Date header, formatted at most once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def value(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._value = formatdate(now, usegmt=True).encode()
        return self._value


_DATE = HttpDate()


class RunNow:
    """The `OnePerTurn` interface for a server with no timer to protect (the layer
    proxy): work runs at once."""

    def submit(self, work: Callable[..., None], *args: object) -> None:
        work(*args)


class OnePerTurn:
    """Runs queued work one item per event-loop turn, in order.

    When many requests land together (a closed-loop client starts 200 new ones the
    moment 200 streams end) or many streams end in one engine step, doing all that work
    in one loop turn would hold back the engine's step timer and every token that is
    due. Queued here, the engine's wake-up and its writes run between two items.
    """

    def __init__(self) -> None:
        self._queue: deque[tuple[Callable[..., None], tuple[object, ...]]] = deque()
        self._scheduled = False

    def submit(self, work: Callable[..., None], *args: object) -> None:
        self._queue.append((work, args))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._next)

    def _next(self) -> None:
        work, args = self._queue.popleft()
        try:
            work(*args)
        finally:
            if self._queue:
                asyncio.get_running_loop().call_soon(self._next)
            else:
                self._scheduled = False


async def listen(handler: RequestHandler, host: str, port: int, port_file: Path | None,
                 *, one_per_turn: bool = True) -> tuple[asyncio.AbstractServer, int]:
    """Serve `handler` on host:port (0: any free port) and publish the bound port in
    `port_file` atomically, which is how the launcher learns it. `one_per_turn`: hand
    requests over one per loop turn (see `OnePerTurn`), else at once."""
    loop = asyncio.get_running_loop()
    turns: OnePerTurn | RunNow = OnePerTurn() if one_per_turn else RunNow()
    server = await loop.create_server(
        lambda: HttpConnection(handler, turns), host=host, port=port, backlog=4096,
        reuse_address=True,
    )
    bound = int(server.sockets[0].getsockname()[1])
    if port_file is not None:
        tmp = port_file.with_suffix(port_file.suffix + ".tmp")
        tmp.write_text(str(bound))
        tmp.replace(port_file)
    return server, bound


def run_server(main: Coroutine[Any, Any, None]) -> None:
    """A server process's main: run `main` (which listens until cancelled) with uvloop
    when importable; SIGTERM/SIGINT end the run cleanly."""
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        runner = asyncio.run

    async def guarded() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, task.cancel if task else lambda: None)
        with contextlib.suppress(asyncio.CancelledError):
            await main

    runner(guarded())


def response_head(status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
    reason = REASONS.get(status, "Error").encode()
    lines = [b"HTTP/1.1 %d %s" % (status, reason), b"date: " + _DATE.value()]
    lines.extend(name + b": " + value for name, value in headers)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def chunk(payload: bytes) -> bytes:
    """One chunk of a chunked body."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


LAST_CHUNK = b"0\r\n\r\n"


class HttpConnection(asyncio.Protocol):
    """One client connection. Answers requests one at a time, in order."""

    def __init__(self, handler: RequestHandler, turns: OnePerTurn | RunNow) -> None:
        self.handler = handler
        self.turns = turns  # shared by the server's connections
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.accepted_ns = 0
        self.on_lost: Callable[[], None] | None = None
        self._buffer = bytearray()
        self._busy = False
        self._keep_alive = True
        self._eof = False
        self._continued = False
        self._parse_queued = False
        self._last_read_ns = 0

    # --- asyncio callbacks ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.accepted_ns = time.perf_counter_ns()
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._last_read_ns = time.perf_counter_ns()  # the arrival stamp: before any queue
        self._buffer += data
        if not self._busy and not self._parse_queued:
            self._parse_queued = True
            self.turns.submit(self._parse_in_turn)

    def eof_received(self) -> bool | None:
        self._eof = True
        if not self._busy and not self._parse_queued:
            self.close()
        return True  # keep our half open until the current response ends

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        callback, self.on_lost = self.on_lost, None
        if callback is not None:  # in turn: 500 clients leaving at once is ~10 ms of work
            self.turns.submit(callback)

    # --- answering --------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        """False once the connection is lost or closing: a write would go nowhere."""
        transport = self.transport
        return transport is not None and not self.closed and not transport.is_closing()

    def write(self, data: bytes) -> None:
        if self.writable:
            self.transport.write(data)  # type: ignore[union-attr]

    def send(
        self,
        status: int,
        body: bytes,
        content_type: bytes = b"application/json",
        extra_headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """A complete Content-Length response; then the next request is served."""
        headers = [
            (b"server", b"zerohop-sim"),
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
        ]
        if not self._keep_alive:
            headers.append((b"connection", b"close"))
        headers.extend(extra_headers or [])
        self.write(response_head(status, headers) + body)
        self.finish()

    def start_chunked(
        self, status: int, content_type: bytes, extra_headers: list[tuple[bytes, bytes]]
    ) -> bytes:
        """The head of a chunked response (returned, so the caller can delay it)."""
        headers = [
            (b"server", b"zerohop-sim"),
            (b"content-type", content_type),
            (b"transfer-encoding", b"chunked"),
            (b"cache-control", b"no-cache"),
        ]
        if not self._keep_alive:
            headers.append((b"connection", b"close"))
        headers.extend(extra_headers)
        return response_head(status, headers)

    def finish(self, close: bool = False) -> None:
        """The current response is complete: serve the next request or close."""
        self._busy = False
        self.on_lost = None
        if close or not self._keep_alive or (self._eof and not self._buffer):
            self.close()
            return
        if self._buffer and not self.closed:
            self._parse(time.perf_counter_ns())

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()

    def reset(self) -> None:
        """Abort with a TCP RST (SO_LINGER 0) instead of a FIN."""
        if self.transport is None or self.closed:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    # --- parsing ------------------------------------------------------------------------
    def _parse(self, now_ns: int) -> None:
        buf = self._buffer
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEADER_BYTES:
                self._reject(431, b"request headers too large")
            return
        head = bytes(buf[:end]).decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._reject(400, b"malformed request line")
            return
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._reject(400, b"malformed header line")
                return
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._reject(411, b"chunked request bodies are not supported; send Content-Length")
            return
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._reject(400, b"bad content-length")
            return
        if length < 0 or length > MAX_BODY_BYTES:
            self._reject(413, b"request body too large")
            return
        total = end + 4 + length
        if len(buf) < total:
            if headers.get("expect", "").lower() == "100-continue" and not self._continued:
                self._continued = True  # curl waits for this before sending a large body
                self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return  # wait for the rest of the body
        self._continued = False
        body = bytes(buf[end + 4 : total])
        del buf[:total]
        connection = headers.get("connection", "").lower()
        self._keep_alive = (version == "HTTP/1.1" and connection != "close") or (
            connection == "keep-alive"
        )
        split = urlsplit(target)
        request = HttpRequest(
            method=method,
            target=target,
            path=split.path,
            query=dict(parse_qsl(split.query)),
            headers=headers,
            body=body,
            arrival_ns=now_ns,
            accepted_ns=self.accepted_ns,
            keep_alive=self._keep_alive,
        )
        self._busy = True
        self.handler.handle(self, request)

    def _parse_in_turn(self) -> None:
        """Parse and hand over what the reads buffered, in this connection's turn."""
        self._parse_queued = False
        if self._busy or self.closed:
            return
        self._parse(self._last_read_ns)
        if self._eof and not self._busy:
            self.close()

    def _reject(self, status: int, message: bytes) -> None:
        self._keep_alive = False
        self._busy = True
        self._buffer.clear()
        self.send(status, message, b"text/plain; charset=utf-8")
