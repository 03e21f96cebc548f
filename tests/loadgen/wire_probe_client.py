"""The TTFT-against-the-wire test's own clients: the floor, and the two negative controls.

One keep-alive connection, one streamed chat request at a time, each stamped with
CLOCK_REALTIME just before it is written, and every read stamped with the kernel's
receive time (SO_TIMESTAMPNS), so nothing in Python stands between a packet and its
stamp:

- `floor`: the first read that completes non-empty content is the first token. This is
  as close to the wire as a client gets on this machine at this moment: the test's
  measured floor.
- `role`: the first read that completes the role-only chunk is the first token (what
  `vllm bench serve` times; docs/ttft-vs-vllm-bench.md).
- `hold`: as `floor`, but every read is followed by a blocking sleep of `--hold-ms`
  before the next one, as a client whose loop is held by blocking code: tokens that
  arrive meanwhile wait in the socket and reach it in one read, under the kernel's
  stamp of the last.

    python tests/loadgen/wire_probe_client.py MODE PORT PATH BODY_JSON REQUESTS INTERVAL_S OUT
        [HOLD_MS]

writes one JSON line per request to OUT: {"sent_ns": ..., "ttft_ms": ... or null}.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time

from tests.wire_capture import CONTENT, ROLE, SO_TIMESTAMPNS


def _recv_stamped(sock: socket.socket) -> tuple[bytes, int]:
    data, ancillary, _flags, _addr = sock.recvmsg(65536, socket.CMSG_SPACE(16))
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanos = struct.unpack("qq", value[:16])
            return data, seconds * 1_000_000_000 + nanos
    return data, time.time_ns()


def one_request(sock: socket.socket, request: bytes, mode: str, hold_s: float
                ) -> tuple[int, float | None]:
    """(send stamp, TTFT ms or None) of one streamed request on an open connection."""
    pattern = ROLE if mode == "role" else CONTENT
    sent = time.time_ns()
    sock.sendall(request)
    received, first = b"", None
    while not received.endswith(b"\r\n0\r\n\r\n"):
        data, stamp = _recv_stamped(sock)
        if not data:
            raise ConnectionError("the server closed the connection mid-stream")
        received += data
        if first is None and pattern.search(received):
            first = stamp
        if hold_s:
            time.sleep(hold_s)  # blocking: the loop is held, reads wait
    if not received.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(received[:200].decode("latin-1"))
    return sent, None if first is None else (first - sent) / 1e6


def main() -> int:
    mode, port, path, body, requests, interval_s, out = sys.argv[1:8]
    hold_s = float(sys.argv[8]) / 1e3 if len(sys.argv) > 8 else 0.0
    payload = body.encode()
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
               ).encode() + payload
    sock = socket.create_connection(("127.0.0.1", int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    rows = []
    next_at = time.perf_counter()
    for _ in range(int(requests)):
        time.sleep(max(0.0, next_at - time.perf_counter()))
        sent, ttft = one_request(sock, request, mode, hold_s)
        rows.append({"sent_ns": sent, "ttft_ms": ttft})
        next_at += float(interval_s)
    sock.close()
    with open(out, "w") as file:
        file.writelines(json.dumps(row) + "\n" for row in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
