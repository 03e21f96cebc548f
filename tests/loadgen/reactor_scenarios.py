"""Run under gevent in a child process (tests/loadgen/test_reactor.py): many streams read
by one EpollReactor, with a stall, an early close and a slow first byte among them."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

from zerohop.client.http_stream import Timeouts, stream_request  # noqa: E402
from zerohop.client.protocols import HttpRequest  # noqa: E402
from zerohop.loadgen.reactor import EpollReactor  # noqa: E402

HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(p: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(p), p)


def serve(conn: socket.socket, kind: str) -> None:
    conn.recv(65536)
    conn.sendall(HEAD)
    tokens = 5
    for i in range(tokens):
        if kind == "stall" and i == 2:
            gevent.sleep(1.0)
        gevent.sleep(0.02)
        conn.sendall(chunk(b"data: %d\n\n" % i))
        if kind == "close" and i == 1:
            conn.close()
            return
    conn.sendall(b"0\r\n\r\n")
    gevent.sleep(0.5)
    conn.close()


def main() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    kinds = ["ok"] * 20 + ["stall", "close"]

    def accept_loop() -> None:
        for kind in kinds:
            conn, _ = listener.accept()
            gevent.spawn(serve, conn, kind)

    gevent.spawn(accept_loop)
    reactor = EpollReactor()
    req = HttpRequest(method="POST", path="/", headers={}, body=b"{}")
    results: list[dict[str, object]] = []

    def one(i: int) -> None:
        started = time.perf_counter()
        ex, sock = stream_request(f"http://127.0.0.1:{port}", req,
                                  Timeouts(ttft_s=5, stall_s=0.3, total_s=5), reactor=reactor)
        gaps = [(b[0] - a[0]) / 1e6 for a, b in zip(ex.reads, ex.reads[1:], strict=False)]
        results.append({"end": ex.end, "payload": b"".join(p for _, p in ex.reads).decode(),
                        "gaps_ms": gaps, "reusable": sock is not None,
                        "events_per_read": [p.count(b"data: ") for _, p in ex.reads],
                        "duration_s": time.perf_counter() - started})
        if sock is not None:
            sock.close()

    t0 = time.perf_counter()
    gevent.joinall([gevent.spawn(one, i) for i in range(len(kinds))])
    json.dump({"results": results, "elapsed_s": time.perf_counter() - t0}, sys.stdout)


if __name__ == "__main__":
    main()
