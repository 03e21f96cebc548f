"""A canned-stream target for sender benchmarks: the cheapest server that still speaks
the OpenAI chat stream (HTTP/1.1 keep-alive, chunked SSE, usage, `[DONE]`).

Every POST gets the same pre-encoded answer (`--tokens` content chunks, one write), so
the server's CPU per request is a few µs and a sender benchmark measures the sender, not
the target. `GET /v1/models` names one model; everything else is 404 (so the client
sizes prompts from usage). The process pins itself to `--cpu` and prints its port.

    python tests/bench/canned_stream_server.py --port 0 --cpu 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys

MODEL = "canned"


def sse_body(tokens: int, prompt_tokens: int) -> bytes:
    """The chunked body of one streamed chat completion (all chunks in one buffer)."""
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": f" t{i}"}}]} for i in range(tokens)]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    events.append({"choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                            "completion_tokens": tokens,
                                            "total_tokens": prompt_tokens + tokens}})
    out = bytearray()
    for event in events:
        event = {"id": "c", "object": "chat.completion.chunk", "model": MODEL, **event}
        data = f"data: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
        out += b"%x\r\n%s\r\n" % (len(data), data)
    done = b"data: [DONE]\n\n"
    out += b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)
    return bytes(out)


def response(status: str, content_type: str, body: bytes, *, chunked: bool = False) -> bytes:
    length = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % len(body)
    return (b"HTTP/1.1 %s\r\nContent-Type: %s\r\n%s\r\n\r\n"
            % (status.encode(), content_type.encode(), length)) + body


class CannedProtocol(asyncio.Protocol):
    """Parses request heads and bodies (Content-Length) from a keep-alive stream."""

    def __init__(self, stream: bytes, models: bytes, missing: bytes) -> None:
        self.stream, self.models, self.missing = stream, models, missing
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end]
            length = 0
            marker = head.lower().find(b"content-length:")
            if marker >= 0:
                line_end = head.find(b"\r\n", marker)
                length = int(head[marker + 15:line_end if line_end >= 0 else None])
            end = head_end + 4 + length
            if len(self.buf) < end:
                return
            self.buf = self.buf[end:]
            if head.startswith(b"POST"):
                out = self.stream
            elif head.startswith(b"GET /v1/models"):
                out = self.models
            else:
                out = self.missing
            assert self.transport is not None
            self.transport.write(out)


def start(cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    """Start the server in its own process (pinned to `cpu`); its process and base URL."""
    cmd = [sys.executable, __file__, "--port", "0"]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline())}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this core")
    parser.add_argument("--tokens", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a burst opens thousands
    stream = response("200 OK", "text/event-stream", sse_body(args.tokens, args.prompt_tokens),
                      chunked=True)
    models = response("200 OK", "application/json", json.dumps(
        {"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode())
    missing = response("404 Not Found", "application/json", b'{"error":"not found"}')
    try:
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: CannedProtocol(stream, models, missing),
                                          "127.0.0.1", args.port, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        sys.stdout.close()
        await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
