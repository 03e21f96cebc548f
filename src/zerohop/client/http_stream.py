"""A minimal HTTP/1.1 streaming client on plain sockets: the measurement hot path.

Why not requests or geventhttpclient: both add per-chunk work or buffer small reads,
and a buffered read is stamped when the buffer is handed over, not when it arrived
(tests/loadgen/test_client_fidelity.py holds this client to 1 ms of the truth). Here the hot
path is `recv` → timestamp → keep the bytes; HTTP chunk framing is undone per read (a few
`bytes.find` calls) only to know where the body ends, and SSE events and JSON are decoded
after the stream ends (`measure.py`). Under Locust the `socket` module is gevent's, so
every blocking call here yields to the hub.

The timestamp of a read is the kernel's, where the OS offers it (Linux `SO_TIMESTAMPNS`:
when the bytes reached this host's TCP stack), so a read that Python got to late — the
hub busy with other streams, a batch of tokens from one engine step queueing behind each
other — is still stamped when the bytes arrived. Bytes that waited unread together share
the stamp of the last of them, as events of one read always do. Where kernel stamps are
missing, the read is stamped when `recv` returned.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from zerohop.client.protocols import HttpRequest
from zerohop.core.http_chunked import ChunkedDecoder

RECV_BYTES = 65536
MAX_HEADER_BYTES = 64 * 1024
# Linux: SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) delivers a struct timespec (CLOCK_REALTIME)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
_ANC_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0

# how a raw exchange ended (measure.py turns these into outcomes)
END_COMPLETE = "complete"  # body framing says the body is complete
END_EOF = "eof"  # peer closed (close-delimited body, or cut short)
END_CONNECT_ERROR = "connect_error"
END_TIMEOUT_TTFT = "timeout_ttft"
END_STALL = "stall"
END_TIMEOUT_TOTAL = "timeout_total"
END_RESET = "reset"
END_PROTOCOL = "protocol_error"


@dataclass(frozen=True)
class Timeouts:
    """Separate limits, as operators configure them: connect, first content, silence
    between reads once content flows, and the whole request."""

    connect_s: float = 10.0
    ttft_s: float = 120.0
    stall_s: float = 60.0
    total_s: float = 600.0


@dataclass
class RawExchange:
    """Everything one request saw on the wire, with the perf_counter_ns of each read."""

    sent_ns: int = 0
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    reads: list[tuple[int, bytes]] = field(default_factory=list)  # de-chunked body pieces
    end_ns: int = 0
    end: str = END_EOF
    error: str | None = None


def stream_request(
    base_url: str,
    request: HttpRequest,
    timeouts: Timeouts,
    *,
    first_content: Callable[[int, bytes], bool] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
    sock: socket.socket | None = None,
    reactor: Reactor | None = None,
) -> tuple[RawExchange, socket.socket | None]:
    """Send one request and read the whole response as it arrives.

    `first_content(ts, payload)` is given each body read while no content has been seen
    (an incremental decoder: `measure.StreamDecode.feed_early`) and tells whether the body
    so far holds a content event; until it says yes the TTFT limit applies, after it the
    stall limit. Returns the exchange and the socket when it may be reused
    (keep-alive, body complete), else None. A `reactor` (one per process, serving every
    stream at once) does the reading instead of this call's own loop.
    """
    ex = RawExchange()
    host, port, netloc = _target(base_url)
    start_ns = clock()
    if sock is None:
        try:
            sock = _connect(host, port, timeouts.connect_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            enable_kernel_timestamps(sock)
        except OSError as exc:
            ex.sent_ns = ex.end_ns = clock()
            ex.end, ex.error = END_CONNECT_ERROR, f"{type(exc).__name__}: {exc}"
            return ex, None
    payload = _request_head(request, netloc) + request.body
    try:
        ex.sent_ns = clock()
        _send_all(sock, payload)
    except OSError as exc:
        ex.end_ns = clock()
        ex.end, ex.error = END_CONNECT_ERROR, f"send failed: {type(exc).__name__}: {exc}"
        _close(sock)
        return ex, None
    if reactor is not None:
        reader = ResponseReader(ex, timeouts, start_ns, first_content)
        reactor.read(sock, reader)
        reusable = reader.reusable
    else:
        reusable = _read_response(sock, ex, timeouts, start_ns, first_content, clock)
    if not reusable:
        _close(sock)
        return ex, None
    return ex, sock


@functools.lru_cache(maxsize=64)
def _target(base_url: str) -> tuple[str, int, str]:
    """(host, port, Host header) of a base URL, parsed once per URL, not per request."""
    parts = urlsplit(base_url)
    if parts.scheme == "https":
        raise ValueError("https targets are not supported by the streaming client yet")
    host = parts.hostname or "127.0.0.1"
    return host, parts.port or 80, parts.netloc.rpartition("@")[2] or host  # no user:pass@


RESOLVE_TTL_S = 30.0
_resolved: dict[tuple[str, int], tuple[float, list[tuple]]] = {}


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """`socket.create_connection` with the name resolved at most every RESOLVE_TTL_S:
    under gevent every lookup, even of a literal address, is a trip through a thread
    pool, which cost more than the request itself when a burst of arrivals opens new
    connections (tests/bench/bench_open_loop_sender.py). Addresses are tried in order."""
    now = time.monotonic()
    cached = _resolved.get((host, port))
    if cached is None or now - cached[0] > RESOLVE_TTL_S:
        cached = (now, socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        _resolved[(host, port)] = cached
    error: OSError | None = None
    for family, kind, proto, _name, address in cached[1]:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout_s)
            sock.connect(address)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"no address for {host}:{port}")


class Reactor(Protocol):
    """Reads many sockets at once and feeds each one's ResponseReader until it is done."""

    def read(self, sock: socket.socket, reader: ResponseReader) -> None: ...

    def pump(self) -> None:
        """Read whatever has arrived on any stream now, without waiting (called between
        slices of other CPU work, so no stream waits for that work to finish)."""


def enable_kernel_timestamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp received data (Linux); False where it cannot."""
    if not sys.platform.startswith("linux") or not _ANC_BYTES:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def stamped_recv(sock: socket.socket, clock: Callable[[], int]
                  ) -> Callable[[], tuple[bytes, int]]:
    """A `recv` returning (bytes, perf_counter_ns of their arrival). With kernel stamps
    the kernel's wall-clock arrival is mapped onto perf_counter through the offset read at
    that moment (so wall-clock steps during a run do not leak in), never later than the
    read itself; a read without a stamp (the socket never asked for them) is stamped
    when it returned. An injected clock (tests) always stamps at the read."""
    if clock is time.perf_counter_ns and sys.platform.startswith("linux") and _ANC_BYTES:
        recvmsg, unpack = sock.recvmsg, _TIMESPEC.unpack_from
        perf_ns, wall_ns = time.perf_counter_ns, time.time_ns

        def stamped() -> tuple[bytes, int]:
            data, ancillary, _flags, _addr = recvmsg(RECV_BYTES, _ANC_BYTES)
            # both clocks at once: the process preempted between the two reads would
            # shift the stamp earlier by the time it waited (negative E2E were seen on
            # a loaded 2-core machine when the wall clock was read after the loop)
            now, wall = perf_ns(), wall_ns()
            for level, kind, blob in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(blob) >= 16:
                    sec, nsec = unpack(blob)
                    return data, min(now, now - (wall - (sec * 1_000_000_000 + nsec)))
            return data, now

        return stamped
    recv = sock.recv

    def plain() -> tuple[bytes, int]:
        data = recv(RECV_BYTES)
        return data, clock()

    return plain


def _send_all(sock: socket.socket, payload: bytes) -> None:
    """Write the request with the send stamp's next system call. gevent's `sendall`
    first asks the socket's buffer size (a system call of its own): on a loaded machine
    the process was preempted there, between the stamp and the packet, and 3 % of
    requests' TTFT read 1-3 ms long against the wire (tests/loadgen/test_ttft_vs_wire.py
    on a 2-core machine shared with other work). What one `send` leaves is sent by
    `sendall`, as before."""
    raw = getattr(sock, "_sock", sock)  # gevent's socket wraps the real, non-blocking one
    try:
        sent = raw.send(payload)
    except BlockingIOError:
        sent = 0
    if sent < len(payload):
        sock.sendall(memoryview(payload)[sent:])


def _request_head(request: HttpRequest, netloc: str) -> bytes:
    lines = [f"{request.method} {request.path} HTTP/1.1", f"Host: {netloc}"]
    lower = {k.lower() for k in request.headers}
    for key, value in request.headers.items():
        lines.append(f"{key}: {value}")
    if "content-length" not in lower:
        lines.append(f"Content-Length: {len(request.body)}")
    if "accept" not in lower:
        lines.append("Accept: text/event-stream, application/json")
    lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _read_response(
    sock: socket.socket,
    ex: RawExchange,
    timeouts: Timeouts,
    start_ns: int,
    first_content: Callable[[int, bytes], bool] | None,
    clock: Callable[[], int],
) -> bool:
    """Fill `ex` with blocking (or gevent-cooperative) reads; return True when the
    connection can carry another request."""
    reader = ResponseReader(ex, timeouts, start_ns, first_content)
    recv = stamped_recv(sock, clock)
    while not reader.done:
        now = clock()
        deadline, kind = reader.deadline()
        if deadline <= now:
            reader.expire(now, kind)
            break
        sock.settimeout((deadline - now) / 1e9)
        try:
            data, ts = recv()  # the timestamp belongs to the read that delivered the bytes
        except TimeoutError:
            reader.expire(clock(), kind)
            break
        except OSError as exc:
            reader.fail(clock(), exc)
            break
        reader.feed(ts, data)
    return reader.reusable


class ResponseReader:
    """The response side of one exchange as a state machine fed with timestamped reads:
    status line and headers, chunked or Content-Length framing, early content detection
    (for the TTFT limit) and the deadlines. Whoever reads the socket — a blocking loop or
    a reactor serving many sockets — feeds it; it never touches the socket itself."""

    def __init__(self, ex: RawExchange, timeouts: Timeouts, start_ns: int,
                 first_content: Callable[[int, bytes], bool] | None) -> None:
        self.ex = ex
        self.done = False
        self.reusable = False
        self._total_deadline = start_ns + int(timeouts.total_s * 1e9)
        self._ttft_deadline = ex.sent_ns + int(timeouts.ttft_s * 1e9)
        self._stall_ns = int(timeouts.stall_s * 1e9)
        self._first_content = first_content
        self._header_buf = b""
        self._body_started = False
        self._decoder: ChunkedDecoder | None = None
        self._content_left: int | None = None
        self._awaiting_content = True  # the TTFT limit applies until content arrives
        self._last_read_ns = ex.sent_ns

    @property
    def awaiting_content(self) -> bool:
        """True until the first content event (or a response without content) arrived."""
        return self._awaiting_content and not self.done

    def deadline(self) -> tuple[int, str]:
        """When this exchange times out if nothing more arrives, and as what."""
        if self._awaiting_content:
            deadline, kind = self._ttft_deadline, END_TIMEOUT_TTFT
        else:
            deadline, kind = self._last_read_ns + self._stall_ns, END_STALL
        if self._total_deadline <= deadline:
            return self._total_deadline, END_TIMEOUT_TOTAL
        return deadline, kind

    def expire(self, now: int, kind: str) -> None:
        self._end(now, kind)

    def fail(self, now: int, exc: BaseException) -> None:
        self._end(now, END_RESET, f"{type(exc).__name__}: {exc}")

    def feed(self, ts: int, data: bytes) -> None:
        """One read: `data` (b"" = the peer closed) that arrived at perf_counter_ns `ts`."""
        ex = self.ex
        if not data:
            if ex.status is None:
                self._end(ts, END_RESET, "connection closed before a response")
            else:
                self._end(ts, END_EOF)
            return
        self._last_read_ns = ts
        if not self._body_started:
            data = self._head(ts, data)
            if self.done or not self._body_started:
                return
            if not data and self._content_left != 0:
                return
        if self._decoder is not None:
            try:
                payload = self._decoder.feed(data)
            except ValueError as exc:
                self._end(ts, END_PROTOCOL, f"bad chunked framing: {exc}")
                return
        else:
            payload = data
            if self._content_left is not None:
                payload = data[: self._content_left]
                self._content_left -= len(payload)
        if payload:
            ex.reads.append((ts, payload))
            if self._awaiting_content and (
                    self._first_content is None or self._first_content(ts, payload)):
                self._awaiting_content = False
        if (self._decoder is not None and self._decoder.done) or self._content_left == 0:
            self._end(ts, END_COMPLETE)
            self.reusable = ex.headers.get("connection", "").lower() != "close"

    def _head(self, ts: int, data: bytes) -> bytes:
        """Collect the status line and headers; return the body bytes that followed."""
        self._header_buf += data
        split = self._header_buf.find(b"\r\n\r\n")
        if split < 0:
            if len(self._header_buf) > MAX_HEADER_BYTES:
                self._end(ts, END_PROTOCOL, "response headers larger than 64 KiB")
            return b""
        ex = self.ex
        try:
            _parse_head(self._header_buf[:split], ex)
        except ValueError as exc:
            self._end(ts, END_PROTOCOL, str(exc))
            return b""
        self._body_started = True
        if "chunked" in ex.headers.get("transfer-encoding", "").lower():
            self._decoder = ChunkedDecoder()
        elif "content-length" in ex.headers:
            try:
                self._content_left = int(ex.headers["content-length"])
            except ValueError:
                self._end(ts, END_PROTOCOL, "bad Content-Length")
                return b""
        body = self._header_buf[split + 4 :]
        self._header_buf = b""
        if ex.status != 200:
            self._awaiting_content = False  # an error body carries no content
        return body

    def _end(self, ts: int, kind: str, error: str | None = None) -> None:
        self.done = True
        self.ex.end_ns, self.ex.end = ts, kind
        if error is not None:
            self.ex.error = error


def _parse_head(head: bytes, ex: RawExchange) -> None:
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
        raise ValueError(f"not an HTTP response: {lines[0][:60]!r}")
    try:
        ex.status = int(status_line[1])
    except ValueError:
        raise ValueError(f"bad status line {lines[0][:60]!r}") from None
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep:
            ex.headers[key.strip().lower()] = value.strip()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
