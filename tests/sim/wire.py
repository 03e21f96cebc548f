"""A tiny raw HTTP/1.1 client for the sim's integration tests: it keeps every read with
its timestamp and notices what SDKs hide (a missing terminator, a reset, a truncated
chunked body)."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass
class RawResponse:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""  # de-chunked
    reads: list[tuple[float, bytes]] = field(default_factory=list)  # (perf s, raw bytes)
    complete: bool = False  # the HTTP body ended properly (0-chunk or full length)
    eof: bool = False  # the server closed the connection
    reset: bool = False  # ... with a RST
    headers_at: float | None = None  # perf s when the head arrived
    sent_at: float = 0.0

    def data_lines(self) -> list[str]:
        return [
            ln[6:]
            for ln in self.body.decode("utf-8", "replace").split("\n")
            if ln.startswith("data: ")
        ]

    def events(self) -> list[tuple[str | None, str]]:
        """(event name, data) per SSE block."""
        out = []
        for block in self.body.decode("utf-8", "replace").split("\n\n"):
            if not block.strip():
                continue
            name, data = None, []
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
            out.append((name, "\n".join(data)))
        return out

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    url: str,
    path: str,
    body: Any = None,
    *,
    method: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 15.0,
) -> RawResponse:
    split = urlsplit(url)
    payload = b"" if body is None else json.dumps(body).encode()
    method = method or ("POST" if body is not None else "GET")
    lines = [
        f"{method} {path} HTTP/1.1",
        f"host: {split.hostname}:{split.port}",
        "connection: close",
    ]
    if body is not None:
        lines += ["content-type: application/json", f"content-length: {len(payload)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + payload
    response = RawResponse()
    sock = socket.create_connection((split.hostname, split.port), timeout=timeout)
    try:
        response.sent_at = time.perf_counter()
        sock.sendall(raw)
        buffer = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = sock.recv(1 << 20)
            except ConnectionResetError:
                response.reset = True
                break
            now = time.perf_counter()
            if not data:
                response.eof = True
                break
            response.reads.append((now, data))
            buffer += data
            if not response.status and b"\r\n\r\n" in buffer:
                response.headers_at = now
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                _parse_head(response, head)
            if response.status and _body_done(response, buffer):
                break
        else:
            raise TimeoutError(f"no complete response within {timeout}s")
    finally:
        sock.close()
    if response.status:
        _decode_body(response, buffer)
    return response


def _parse_head(response: RawResponse, head: bytes) -> None:
    lines = head.decode("latin-1").split("\r\n")
    response.status = int(lines[0].split(" ")[1])
    for line in lines[1:]:
        name, _, value = line.partition(":")
        response.headers[name.strip().lower()] = value.strip()


def _body_done(response: RawResponse, buffer: bytes) -> bool:
    if "content-length" in response.headers:
        return len(buffer) >= int(response.headers["content-length"])
    if response.headers.get("transfer-encoding") == "chunked":
        _, done = _dechunk(buffer)
        return done
    return False


def _decode_body(response: RawResponse, buffer: bytes) -> None:
    if response.headers.get("transfer-encoding") == "chunked":
        response.body, response.complete = _dechunk(buffer)
    elif "content-length" in response.headers:
        length = int(response.headers["content-length"])
        response.body = buffer[:length]
        response.complete = len(buffer) >= length
    else:
        response.body = buffer
        response.complete = response.eof


def _dechunk(buffer: bytes) -> tuple[bytes, bool]:
    out: list[bytes] = []
    pos = 0
    while True:
        end = buffer.find(b"\r\n", pos)
        if end < 0:
            return b"".join(out), False
        size = int(buffer[pos:end].split(b";")[0] or b"0", 16)
        if size == 0:
            return b"".join(out), buffer.find(b"\r\n", end + 2) >= 0
        start = end + 2
        if len(buffer) < start + size + 2:
            out.append(buffer[start:])
            return b"".join(out), False
        out.append(buffer[start : start + size])
        pos = start + size + 2
