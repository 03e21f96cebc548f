"""The streaming client's framing, timeouts and timestamps against real local sockets."""

from __future__ import annotations

import select
import socket
import threading
import time

import pytest

from zerohop.client.http_stream import (
    END_COMPLETE,
    END_CONNECT_ERROR,
    END_EOF,
    END_STALL,
    END_TIMEOUT_TOTAL,
    END_TIMEOUT_TTFT,
    ChunkedDecoder,
    Timeouts,
    stream_request,
)
from zerohop.client.protocols import HttpRequest


def chunked(*payloads: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


@pytest.mark.unit
def test_chunked_decoder_any_split() -> None:
    payloads = [b"data: a\n\n", b"data: bb\r\n\r\n", b"x" * 300, b"0\r\n\r\n"]
    raw = chunked(*payloads)
    for step in (1, 2, 3, 7, 64, len(raw)):
        dec = ChunkedDecoder()
        out = b"".join(dec.feed(raw[i : i + step]) for i in range(0, len(raw), step))
        assert out == b"".join(payloads)
        assert dec.done


@pytest.mark.unit
def test_chunked_decoder_payload_ending_like_terminator_is_not_the_end() -> None:
    # a chunk whose payload ends in "0\r\n\r\n" must not be taken for the last chunk
    dec = ChunkedDecoder()
    first = b"data: 0\r\n\r\n"
    raw = b"%x\r\n%s" % (len(first), first)
    assert dec.feed(raw) == first
    assert not dec.done


@pytest.mark.unit
def test_chunked_decoder_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        ChunkedDecoder().feed(b"zz\r\nhello\r\n")


class PacedServer:
    """A one-connection server that sends a scripted response: (delay_s, bytes) steps."""

    def __init__(self, steps: list[tuple[float, bytes]], close: bool = True) -> None:
        self.steps = steps
        self.close = close
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent_at: list[float] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(4096)
            for delay, data in self.steps:
                time.sleep(delay)
                try:
                    conn.sendall(data)
                except OSError:  # the client gave up (a timeout test): expected
                    break
                self.sent_at.append(time.perf_counter())
            if not self.close:
                time.sleep(3)
        self.listener.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


REQ = HttpRequest(method="POST", path="/v1/x", headers={"Content-Type": "application/json"},
                  body=b"{}")
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(p: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(p), p)


@pytest.mark.integration  # a real local socket
@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_reads_timestamped_as_they_arrive() -> None:
    server = PacedServer([(0.0, HEAD), (0.05, _chunk(b"data: 1\n\n")),
                          (0.05, _chunk(b"data: 2\n\n")), (0.0, b"0\r\n\r\n")])
    ex, sock = stream_request(server.url, REQ, Timeouts())
    assert ex.status == 200 and ex.end == END_COMPLETE
    payloads = b"".join(p for _, p in ex.reads)
    assert payloads == b"data: 1\n\ndata: 2\n\n"
    # the two events were 50 ms apart on the server; the reads see that gap, not 0
    first_ts = next(ts for ts, p in ex.reads if b"1" in p)
    second_ts = next(ts for ts, p in ex.reads if b"2" in p)
    assert 0.035 < (second_ts - first_ts) / 1e9 < 0.2
    assert sock is not None
    sock.close()


@pytest.mark.integration  # a real local socket
def test_ttft_timeout_applies_before_content() -> None:
    server = PacedServer([(0.0, HEAD), (1.0, _chunk(b"data: 1\n\n"))])
    ex, _ = stream_request(server.url, REQ, Timeouts(ttft_s=0.2),
                           first_content=lambda _ts, payload: b"data:" in payload)
    assert ex.end == END_TIMEOUT_TTFT
    assert 0.15 < (ex.end_ns - ex.sent_ns) / 1e9 < 0.8


@pytest.mark.integration  # a real local socket
def test_stall_after_first_content() -> None:
    server = PacedServer([(0.0, HEAD), (0.0, _chunk(b"data: 1\n\n")),
                          (1.0, _chunk(b"data: 2\n\n"))])
    found: list[int] = []  # the stamps the detector said yes to

    def first_data(ts: int, payload: bytes) -> bool:
        if b"data:" in payload:
            found.append(ts)
        return bool(found)

    ex, _ = stream_request(server.url, REQ, Timeouts(ttft_s=5, stall_s=0.2),
                           first_content=first_data)
    assert ex.end == END_STALL
    assert found == [ex.reads[0][0]]  # content seen on the first read, then asked no more


@pytest.mark.integration  # a real local socket
def test_total_timeout_wins_when_shorter() -> None:
    steps = [(0.0, HEAD)] + [(0.05, _chunk(b"data: x\n\n"))] * 20
    server = PacedServer(steps)
    ex, _ = stream_request(server.url, REQ, Timeouts(ttft_s=5, stall_s=5, total_s=0.3))
    assert ex.end == END_TIMEOUT_TOTAL


@pytest.mark.integration  # a real local socket
def test_close_without_last_chunk_is_eof() -> None:
    server = PacedServer([(0.0, HEAD), (0.0, _chunk(b"data: 1\n\n"))])
    ex, sock = stream_request(server.url, REQ, Timeouts(ttft_s=5, stall_s=5))
    assert ex.end == END_EOF and sock is None


@pytest.mark.integration  # a real local socket
def test_connect_error() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ex, sock = stream_request(f"http://127.0.0.1:{port}", REQ, Timeouts(connect_s=1))
    assert ex.end == END_CONNECT_ERROR and sock is None and ex.error


@pytest.mark.integration  # a real local socket
def test_kernel_timestamps_stamp_arrival_not_the_late_read() -> None:
    """Bytes that sat unread for 300 ms are stamped when they arrived (Linux kernel
    receive stamps), not when Python got round to reading them."""
    import sys

    from zerohop.client.http_stream import enable_kernel_timestamps

    if not sys.platform.startswith("linux"):
        pytest.skip("kernel receive timestamps are a Linux feature")
    server = PacedServer([(0.0, HEAD), (0.0, _chunk(b"data: 1\n\n")), (0.0, b"0\r\n\r\n")])
    sock = socket.create_connection(("127.0.0.1", server.port))
    assert enable_kernel_timestamps(sock)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    while not sock.recv(65536, socket.MSG_PEEK).endswith(b"0\r\n\r\n"):
        select.select([sock], [], [], 1.0)  # until the whole response sits in the socket
    seen_ns = time.perf_counter_ns()
    time.sleep(0.3)  # then read it late, on purpose
    from zerohop.client.http_stream import RawExchange, _read_response

    ex = RawExchange(sent_ns=time.perf_counter_ns())
    _read_response(sock, ex, Timeouts(), ex.sent_ns, None, time.perf_counter_ns)
    read_ns = time.perf_counter_ns()
    sock.close()
    arrived = ex.reads[0][0]
    # stamped when it arrived, before we even looked (1 ms: the kernel's wall-clock
    # stamp mapped onto perf_counter)
    assert arrived <= seen_ns + 1_000_000
    assert read_ns - arrived >= 300_000_000  # not when we got round to reading it
