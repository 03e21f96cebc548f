"""A finished request leaves no reference cycle behind.

Cyclic garbage is freed only by the garbage collector, and the sim collects rarely (its
hot path allocates a lot): a cycle per request piled up to tens of thousands of objects
and one collection then stalled the step clock for ~25 ms. So every way a request ends
(streamed, buffered, the client leaving mid-stream, an injected fault) must leave its
objects to reference counting.
"""

from __future__ import annotations

import asyncio
import gc
import json

import pytest

from zerohop.sim.config import SimConfig
from zerohop.sim.serving.app import SimApp
from zerohop.sim.serving.http_server import listen

pytestmark = pytest.mark.integration


async def _request(port: int, *, stream: bool, leave_after: int = 0, fault: str = "") -> None:
    body = json.dumps(
        {"model": "llama-3-8b", "prompt": "one two three", "max_tokens": 12, "stream": stream}
    ).encode()
    extra = f"x-zerohop-fault: {fault}\r\n" if fault else ""
    head = (
        "POST /v1/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n"
        f"{extra}content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode() + body)
    received = 0
    while data := await reader.read(65536):
        received += data.count(b"data: ")
        if leave_after and received >= leave_after:
            break  # the client goes away mid-stream
    writer.close()
    await writer.wait_closed()


async def _leaked_objects() -> list[str]:
    app = SimApp(SimConfig(port=0))
    await app.start()
    server, port = await listen(app, "127.0.0.1", 0, None)
    kinds = [
        {"stream": True},
        {"stream": False},
        {"stream": True, "leave_after": 3},
        {"stream": True, "fault": "drop_mid;after=2"},
        {"stream": True, "fault": "stream_error;after=2"},
    ]
    try:
        for kind in kinds:  # first use builds caches that live on: not garbage
            await _request(port, **kind)  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        for _ in range(3):
            await asyncio.gather(*(_request(port, **kind) for kind in kinds))  # type: ignore[arg-type]
        await asyncio.sleep(0.3)  # the aborted sequences' records
        gc.collect()
        return sorted(
            type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("zerohop")
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        server.close()
        await app.stop()


def test_finished_requests_leave_no_reference_cycles() -> None:
    uvloop = pytest.importorskip("uvloop", reason="the sim's event loop")
    assert uvloop.run(_leaked_objects()) == []
