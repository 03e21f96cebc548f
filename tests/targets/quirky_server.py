"""A small OpenAI-style streaming server that counts tokens its own way, for tests.

Real servers differ from the embedded target in how they report usage: some send none,
some a constant or zero, some only in a non-streamed response, some with
`prompt_tokens_details`, and some count output tokens differently from the events they
send. `QuirkyServer(usage=...)` behaves in one of those ways (or answers every request
with HTTP 500) so the client's fallbacks can be tested against a real socket.

Tokens here: one per match of `\\w+|[^\\w\\s]` in the prompt text (a token-id prompt
counts its ids), plus 7 for a chat request's template.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE_MODES = ("normal", "absent", "constant", "zero", "nonstream_only", "details", "overcount")
MODEL = "quirky"
CHAT_OVERHEAD = 7
CONSTANT_PROMPT_TOKENS = 17
_TOKEN = re.compile(r"\w+|[^\w\s]")


def prompt_tokens(body: dict[str, Any]) -> int:
    """This server's prompt count for a request body."""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        return len(prompt)
    if isinstance(prompt, str):
        return len(_TOKEN.findall(prompt))
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    return len(_TOKEN.findall(text)) + CHAT_OVERHEAD


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each SSE chunk leaves at once, as real servers do
    server: _Server

    def log_message(self, *_: Any) -> None:  # keep test output clean
        pass

    def _json(self, status: int, obj: object) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.server.usage == "error500":
            self._json(500, {"error": {"type": "internal", "message": "always failing"}})
        elif self.path.startswith("/v1/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._json(200, {"status": "ok"})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/tokenize" and self.server.tokenize_max_len:
            # vLLM's way: a prompt longer than the context counts as the context length
            limit = self.server.tokenize_max_len
            self._json(200, {"count": min(prompt_tokens(body), limit), "max_model_len": limit,
                             "tokens": []})
        elif not self.path.endswith("/completions"):  # no /tokenize: most servers
            self._json(404, {"error": {"type": "not_found", "message": self.path}})
        elif self.server.usage == "error500":
            self._json(500, {"error": {"type": "internal", "message": "always failing"}})
        else:
            self._complete(body)

    def _complete(self, body: dict[str, Any]) -> None:
        chat = self.path.endswith("/chat/completions")
        n_out = max(1, int(body.get("max_tokens", 4)))
        usage = self._usage(body, n_out, streamed=bool(body.get("stream")))
        if not body.get("stream"):
            choice: dict[str, Any] = ({"index": 0, "message": {"role": "assistant",
                                                                "content": "w " * n_out}}
                                      if chat else {"index": 0, "text": "w " * n_out})
            reply: dict[str, Any] = {"id": "x", "choices": [choice]}
            if usage is not None:
                reply["usage"] = usage
            self._json(200, reply)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for _ in range(n_out):
            piece = {"delta": {"content": "w "}} if chat else {"text": "w "}
            self._chunk({"id": "x", "choices": [{"index": 0, **piece}]})
        if usage is not None:
            self._chunk({"id": "x", "choices": [], "usage": usage})
        self._write(b"data: [DONE]\n\n")
        self._write(b"")

    def _usage(self, body: dict[str, Any], n_out: int, *, streamed: bool
               ) -> dict[str, Any] | None:
        mode = self.server.usage
        if mode == "absent" or (mode == "nonstream_only" and streamed):
            return None
        prompt = prompt_tokens(body)
        if mode == "constant":
            prompt = CONSTANT_PROMPT_TOKENS
        elif mode == "zero":
            return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        completion = n_out + 2 if mode == "overcount" else n_out
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}
        if mode == "details":
            usage["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": None}
            usage["completion_tokens_details"] = {"reasoning_tokens": 0}
        return usage

    def _chunk(self, obj: object) -> None:
        self._write(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _write(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    usage = "normal"
    tokenize_max_len = 0  # > 0: serve /tokenize with this context length


@contextmanager
def quirky_server(usage: str = "normal", *, tokenize_max_len: int = 0) -> Iterator[str]:
    """Serve on a free loopback port for the `with` block; yields the base URL.
    `usage` is one of USAGE_MODES, or "error500" (every request fails);
    `tokenize_max_len` > 0 adds a vLLM-like /tokenize with that context length."""
    if usage not in (*USAGE_MODES, "error500"):
        raise ValueError(f"usage: unknown mode {usage!r}")
    server = _Server(("127.0.0.1", 0), _Handler)
    server.usage = usage
    server.tokenize_max_len = tokenize_max_len
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
