"""Scrape one Prometheus `/metrics` URL on a cadence; a failed scrape is a gap.

The fetch is a plain HTTP/1.0 GET on the interpreter's *original* socket (see
`realthreads`), with no proxy lookup: it works the same in the agent subprocess and in a
real thread of a gevent-patched Locust process, and talks only to the URL given. The
sample time is the midpoint of request and response, the best estimate of when the
server rendered its counters.
"""

from __future__ import annotations

import errno
import socket as _stdlib_socket
import ssl
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from zerohop.telemetry.prometheus import PromDeriver, parse_exposition
from zerohop.telemetry.samples import GapTracker, Sample, TelemetryClock, describe_error

MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {strip_userinfo(url)!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return cls(parts.scheme, parts.hostname, port, path)

    @property
    def source(self) -> str:
        """`prom:host:port`, plus the path when it is not the usual /metrics."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        base = f"prom:{host}:{self.port}"
        return base if self.path == "/metrics" else base + self.path


def strip_userinfo(url: str) -> str:
    """A URL safe to log: credentials (user:pass@) removed."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


class PrometheusScraper:
    """Sampler for one endpoint: scrape, derive canonical rows, or record a gap."""

    def __init__(self, url: str, clock: TelemetryClock, *, interval_s: float = 1.0,
                 timeout_s: float = 2.0, keep_raw: bool = True) -> None:
        self.endpoint = Endpoint.parse(url)
        self.source = self.endpoint.source
        self.name = self.source.replace(":", "_").replace("/", "_")
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.deriver = PromDeriver(self.source, keep_raw=keep_raw)
        self.gaps = GapTracker(self.source)
        self.scrapes_ok = 0
        self.scrapes_failed = 0
        self.clock = clock

    def start(self, ts: float) -> list[Sample]:
        return []

    def tick(self, ts: float) -> list[Sample]:
        sent = ts
        try:
            text = fetch_text(self.endpoint, self.timeout_s)
            samples = parse_exposition(text)
        except Exception as exc:  # every failure is a gap, none ends the run
            self.scrapes_failed += 1
            self.deriver.reset()
            return self.gaps.missing(sent, failure_reason(exc, self.timeout_s))
        at = (sent + self.clock.now()) / 2
        self.scrapes_ok += 1
        return [*self.gaps.present(at), *self.deriver.feed(at, samples)]

    def close(self, ts: float) -> list[Sample]:
        return self.gaps.close_all(ts)


def failure_reason(exc: BaseException, timeout_s: float) -> str:
    """The gap's reason in words an operator expects ("connection refused")."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError | _stdlib_socket.timeout):
        return f"timeout after {timeout_s:g} s"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, HttpStatusError):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EHOSTUNREACH:
        return "host unreachable"
    if isinstance(exc, ValueError):
        return f"unparsable exposition: {describe_error(exc)}"
    return describe_error(exc)


class HttpStatusError(Exception):
    pass


def fetch_text(endpoint: Endpoint, timeout_s: float) -> str:
    """GET the endpoint and return its body as text; HttpStatusError on non-200."""
    sock = _connect(endpoint, timeout_s)
    try:
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        request = (
            f"GET {endpoint.path} HTTP/1.0\r\nHost: {host}:{endpoint.port}\r\n"
            "Accept: text/plain;version=0.0.4\r\nUser-Agent: zerohop-telemetry\r\n"
            "Connection: close\r\n\r\n"
        )
        sock.sendall(request.encode("ascii"))
        chunks = []
        size = 0
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise HttpStatusError(f"response larger than {MAX_BODY_BYTES} bytes")
    finally:
        sock.close()
    return _parse_response(b"".join(chunks))


def _connect(endpoint: Endpoint, timeout_s: float) -> Any:
    socket_class, getaddrinfo = _original_socket()
    infos = getaddrinfo(endpoint.host, endpoint.port, 0, _stdlib_socket.SOCK_STREAM)
    last: BaseException | None = None
    for family, kind, proto, _name, address in infos:
        sock = socket_class(family, kind, proto)
        sock.settimeout(timeout_s)
        try:
            sock.connect(address)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        if endpoint.scheme == "https":
            context = ssl.create_default_context()
            return context.wrap_socket(sock, server_hostname=endpoint.host)
        return sock
    raise last or OSError(f"cannot resolve {endpoint.host}")


def _original_socket() -> tuple[Any, Any]:
    """The unpatched socket class and resolver (gevent's would need a hub per thread)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None:
        cls, getaddrinfo = monkey.get_original("socket", ["socket", "getaddrinfo"])
        return cls, getaddrinfo
    return _stdlib_socket.socket, _stdlib_socket.getaddrinfo


def _parse_response(raw: bytes) -> str:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise HttpStatusError("incomplete HTTP response")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise HttpStatusError(f"not an HTTP response: {lines[0][:60]!r}")
    status = int(parts[1])
    if status != 200:
        raise HttpStatusError(f"HTTP {status}")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if len(body) < length:
            raise HttpStatusError("response cut short")
        body = body[:length]
    if headers.get("content-encoding", "identity").lower() not in ("identity", ""):
        raise HttpStatusError(f"unexpected content-encoding {headers['content-encoding']}")
    return body.decode("utf-8", errors="replace")


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while True:
        end = body.index(b"\r\n", pos)
        size = int(body[pos:end].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2

