"""The load of bench_sim_emission.py: closed-loop streams against one or more sim replicas.

One client process, uvloop, one `asyncio.Protocol` per stream (no StreamReader, no
parsing: it counts the token events and watches for the chunked body's end), so that the
client stays light next to the sims it drives. Stream i goes to replica i % K. The
parent asks for the counters with "snap" (over a pipe) at the window's edges and ends
the client with "quit".
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import uvloop

END = b"0\r\n\r\n"


@dataclass(frozen=True)
class ClientLoad:
    ports: tuple[int, ...]
    streams: int
    ramp_s: float
    prompt: int
    max_tokens: int
    model: str


def request_bytes(load: ClientLoad, port: int) -> bytes:
    body = json.dumps(
        {
            "model": load.model,
            "prompt": list(range(load.prompt)),
            "max_tokens": load.max_tokens,
            "stream": True,
            "ignore_eos": True,
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


class _Counters:
    __slots__ = ("errors", "requests", "stopping", "tokens")

    def __init__(self) -> None:
        self.tokens = self.requests = self.errors = 0
        self.stopping = False


class _Stream(asyncio.Protocol):
    __slots__ = ("counters", "request", "tail", "transport")

    def __init__(self, request: bytes, counters: _Counters) -> None:
        self.request = request
        self.counters = counters
        self.tail = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        counters = self.counters
        counters.tokens += data.count(b'"text":"')
        ends = data.endswith(END) if len(data) >= 5 else (self.tail + data).endswith(END)
        self.tail = data[-5:]
        if ends:
            counters.requests += 1
            if not counters.stopping and self.transport is not None:
                self.transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.counters.stopping:
            self.counters.errors += 1


def client_process(load: ClientLoad, cores: set[int] | None, control: Connection) -> None:
    if cores:
        os.sched_setaffinity(0, cores)
    uvloop.run(_drive(load, control))


async def _drive(load: ClientLoad, control: Connection) -> None:
    loop = asyncio.get_running_loop()
    counters = _Counters()
    requests = {port: request_bytes(load, port) for port in load.ports}
    streams: list[_Stream] = []
    done = loop.create_future()

    async def connect(index: int) -> None:
        port = load.ports[index % len(load.ports)]
        await asyncio.sleep(index * load.ramp_s / max(load.streams, 1))
        try:
            _, stream = await loop.create_connection(
                lambda: _Stream(requests[port], counters), "127.0.0.1", port
            )
        except OSError:
            counters.errors += 1
            return
        streams.append(stream)

    def on_command() -> None:
        command = control.recv()
        if command == "snap":
            control.send(
                {
                    "t": time.monotonic(),
                    "tokens": counters.tokens,
                    "requests": counters.requests,
                    "errors": counters.errors,
                    "connected": len(streams),
                }
            )
        elif command == "quit" and not done.done():
            done.set_result(None)

    loop.add_reader(control.fileno(), on_command)
    connecting = [loop.create_task(connect(i)) for i in range(load.streams)]
    await done
    counters.stopping = True
    for task in connecting:
        task.cancel()
    for stream in streams:
        if stream.transport is not None:
            stream.transport.abort()
    control.send("bye")
