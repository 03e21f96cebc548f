"""One reader for every stream of a Locust process.

With one greenlet per stream, each token costs a hub→greenlet switch, a failed
non-blocking `recv` and a successful one, and when an engine step releases a token to
200 streams at once they queue behind each other. Here one greenlet waits on an epoll
set of all the streams' sockets (cooperatively: gevent watches the epoll descriptor),
then reads every ready socket with a single non-blocking `recvmsg` each and feeds the
stream's ResponseReader. Timestamps are the kernel's receive stamps (see
`http_stream.py`), so the order in which ready sockets are served does not shift them;
the reactor only has to read each socket before its next token arrives, which it does
at a fraction of the per-greenlet cost. Timeouts are checked every 10 ms by a second
greenlet. Both live as long as the process: a reader greenlet spawned whenever the set
of streams came back from empty, and a new watcher and timeout for every wait, cost
more than the rest of a short request's reading (tests/bench/bench_open_loop_sender.py).

That "before its next token" matters: when two tokens wait unread in a socket the
kernel merges them and keeps only the later arrival stamp, so a first token read late
reports the second one's time. Other greenlets' CPU work (decoding finished streams,
building requests) therefore calls `pump()` between small slices: gevent's hub would
otherwise run every ready greenlet before it polls for I/O again, and 200 streams
finishing in one engine step add up to more than one inter-token gap. And a stream
still waiting for its first token is served first: a second epoll set holds only those,
and a pass over many ready sockets checks it every few reads, so a first token that
arrives while 200 other streams are being read waits for a handful of reads, not all.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from dataclasses import dataclass
from typing import Any

import gevent
from gevent.event import Event

from zerohop.client.http_stream import ResponseReader, stamped_recv

DEADLINE_CHECK_NS = 10_000_000
FIRST_TOKEN_CHECK_EVERY = 8  # reads between looks at the streams awaiting a first token


@dataclass
class _Stream:
    reader: ResponseReader
    recv: Any
    done: Event
    awaiting_first: bool = True


class EpollReactor:
    """Create in the process that uses it (after Locust forks), not at import."""

    def __init__(self) -> None:
        epoll = _original_epoll()
        self._epoll = epoll()  # every stream
        self._first = epoll()  # streams still waiting for their first content
        self._streams: dict[int, _Stream] = {}
        self._greenlets: list[gevent.Greenlet] = []

    def read(self, sock: socket.socket, reader: ResponseReader) -> None:
        raw = getattr(sock, "_sock", sock)  # gevent's socket wraps the real one
        raw.setblocking(False)  # as gevent keeps it; the reactor never waits in recv
        fd = raw.fileno()
        stream = _Stream(reader, stamped_recv(raw, time.perf_counter_ns), Event())
        self._streams[fd] = stream
        self._epoll.register(fd, select.EPOLLIN)
        self._first.register(fd, select.EPOLLIN)
        if not self._greenlets or any(g.dead for g in self._greenlets):
            gevent.killall(self._greenlets)
            self._greenlets = [gevent.spawn(self._run), gevent.spawn(self._watch_deadlines)]
        try:
            stream.done.wait()
        finally:
            self._forget(fd)

    def pump(self) -> None:
        self._serve_first()
        for count, (fd, _events) in enumerate(self._epoll.poll(0), 1):
            stream = self._streams.get(fd)
            if stream is not None:
                self._serve(fd, stream)
            if count % FIRST_TOKEN_CHECK_EVERY == 0:
                self._serve_first()

    def _serve_first(self) -> None:
        for fd, _events in self._first.poll(0):
            stream = self._streams.get(fd)
            if stream is not None:
                self._serve(fd, stream)

    def _forget(self, fd: int) -> None:
        stream = self._streams.pop(fd, None)
        if stream is not None:
            with contextlib.suppress(OSError):
                self._epoll.unregister(fd)
            if stream.awaiting_first:
                with contextlib.suppress(OSError):
                    self._first.unregister(fd)

    def close(self) -> None:
        """Stop the reader and the deadline greenlets (a process that ends need not)."""
        gevent.killall(self._greenlets)
        self._greenlets = []

    def _run(self) -> None:
        hub = gevent.get_hub()
        watcher = hub.loop.io(self._epoll.fileno(), 1)  # readable: some stream is
        try:
            while True:
                hub.wait(watcher)
                self.pump()
        finally:
            watcher.close()

    def _watch_deadlines(self) -> None:
        while True:
            gevent.sleep(DEADLINE_CHECK_NS / 1e9)
            if self._streams:
                self._expire(time.perf_counter_ns())

    def _serve(self, fd: int, stream: _Stream) -> None:
        try:
            data, ts = stream.recv()
        except BlockingIOError:
            return
        except OSError as exc:
            stream.reader.fail(time.perf_counter_ns(), exc)
        else:
            stream.reader.feed(ts, data)
        if stream.reader.done:
            self._forget(fd)
            stream.done.set()
        elif stream.awaiting_first and not stream.reader.awaiting_content:
            stream.awaiting_first = False
            with contextlib.suppress(OSError):
                self._first.unregister(fd)

    def _expire(self, now: int) -> None:
        for fd, stream in list(self._streams.items()):
            deadline, kind = stream.reader.deadline()
            if deadline <= now:
                stream.reader.expire(now, kind)
                self._forget(fd)
                stream.done.set()


def _original_epoll() -> Any:
    """select.epoll as the OS has it: gevent's monkey patching removes it from `select`."""
    try:
        from gevent import monkey

        return monkey.get_original("select", "epoll")
    except (ImportError, AttributeError):
        return select.epoll
