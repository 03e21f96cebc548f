"""A paced OpenAI chat server that zerohop did not write, for the TTFT-against-the-wire
test: every streamed answer is a role-only chunk, ROLE_GAP_S, then one content chunk
every TOKEN_GAP_S, a finish chunk, a usage chunk and `[DONE]`, each in its own write
(TCP_NODELAY, as uvicorn sets it). A plain threaded `http.server`, so nothing of the
embedded target or of zerohop's client is in its path.

It answers GET /v1/models (one model, `paced`) and 404 on /tokenize, so zerohop sizes
prompts from the usage it reports (a prompt's whitespace-separated words plus 4). A
query string on the chat path is ignored: the test's own clients add one so the capture
tells their requests from zerohop's.

    python tests/loadgen/paced_sse_server.py PORT_FILE

prints nothing; writes its port to PORT_FILE once it listens, and serves until killed.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "paced"
ROLE_GAP_S = 0.003  # role-only chunk -> first content: what a role-only timer gets wrong
TOKEN_GAP_S = 0.020  # between content chunks, as a decode step: a read later merges two
PROMPT_OVERHEAD_TOKENS = 4


def _chunk(payload: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _prompt_tokens(body: dict[str, object]) -> int:
    messages = body.get("messages") or []
    words = sum(len(str(m.get("content", "")).split())
                for m in messages if isinstance(m, dict))  # type: ignore[union-attr]
    return words + PROMPT_OVERHEAD_TOKENS


class PacedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _json(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.split("?")[0] != "/v1/chat/completions":
            self._json(404, {"error": "not found"})
            return
        tokens = max(1, int(body.get("max_tokens") or body.get("max_completion_tokens") or 8))
        usage = {"prompt_tokens": _prompt_tokens(body), "completion_tokens": tokens,
                 "total_tokens": _prompt_tokens(body) + tokens}
        if not body.get("stream"):
            self._json(200, {"id": "c", "object": "chat.completion", "model": MODEL,
                             "choices": [{"index": 0, "finish_reason": "length",
                                          "message": {"role": "assistant",
                                                      "content": " tok" * tokens}}],
                             "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {"id": "c", "object": "chat.completion.chunk", "model": MODEL}
        events = [(_chunk({**base, "choices": [{"index": 0, "delta": {
            "role": "assistant", "content": ""}}]}), ROLE_GAP_S)]
        events += [(_chunk({**base, "choices": [{"index": 0, "delta": {"content": " tok"}}]}),
                    TOKEN_GAP_S)] * tokens
        events.append((_chunk({**base, "choices": [{"index": 0, "delta": {},
                                                     "finish_reason": "length"}]}), 0.0))
        events.append((_chunk({**base, "choices": [], "usage": usage}), 0.0))
        events.append((b"data: [DONE]\n\n", 0.0))
        for data, pause in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            if pause:
                time.sleep(pause)
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), PacedHandler)
    server.daemon_threads = True
    port_file = Path(sys.argv[1])
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.rename(port_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
