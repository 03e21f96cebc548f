"""The loopback write floor, as bench_sim_emission.py measures it next to the sim.

The same method as bench_loopback_burst.py (uvloop `transport.write` of one fresh chunk
to each of N keep-alive TCP_NODELAY loopback sockets, back to back, each write stamped,
one burst every `gap_s`), laid out as the sim run that follows it: one writer process
per sim replica, pinned to that replica's core and at its priority (nice, or real-time
with `--sim-realtime`), with as many sockets as the replica carries streams and chunks
of the sim's token-chunk size; one reader process on the client's cores drains all of
them. The writers burst together or in turn (`stagger`), as the replicas' steps may:
where the reader shares the writers' cores, a write costs more while the reader drains
on the other core (it can when the bursts alternate) than while both cores write.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import uvloop

WARMUP_BURSTS = 50


@dataclass(frozen=True)
class FloorSpec:
    sockets: int  # per writer
    chunk_bytes: int  # one write, chunked framing included
    gap_s: float
    bursts: int
    nice: int
    realtime: bool = False  # SCHED_FIFO writers, as `zerohop sim --realtime` runs
    stagger: bool = False  # writer k bursts k/n of a gap after writer 0 (else together)


@dataclass(frozen=True)
class Floor:
    """One writer's result: µs per write over its bursts (median and p90)."""

    sockets: int
    chunk_bytes: int
    us_per_write: float
    us_per_write_p90: float
    cpu_us_per_write: float  # the writer's CPU time (median), against wall time above


def measure_floor(
    spec: FloorSpec, writer_cores: Sequence[int | None], reader_cores: set[int] | None
) -> list[Floor]:
    """One writer per entry of `writer_cores` (None: not pinned), bursting together or,
    with `spec.stagger`, in turn. The bursts keep a schedule on the shared monotonic
    clock, so the writers' phases hold as the replicas' steps do."""
    ctx = mp.get_context("fork")
    ports: mp.Queue = ctx.Queue()
    ready: mp.Queue = ctx.Queue()
    go = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    n = len(writer_cores)
    writers = [
        ctx.Process(target=_writer, args=(i, core, spec, ports, ready, go, start_at,
                                          i * spec.gap_s / n if spec.stagger else 0.0),
                    daemon=True)
        for i, core in enumerate(writer_cores)
    ]
    for w in writers:
        w.start()
    reader = None
    try:
        found = dict(ports.get(timeout=30) for _ in writers)
        port_list = [found[i] for i in range(len(writers))]
        reader = ctx.Process(
            target=_reader, args=(port_list, spec.sockets, reader_cores), daemon=True
        )
        reader.start()
        for _ in writers:
            ready.get(timeout=60)
        start_at.value = time.monotonic() + 0.1
        go.set()
        wait_s = 60 + (spec.bursts + WARMUP_BURSTS) * spec.gap_s * 3
        results = dict(ready.get(timeout=wait_s) for _ in writers)
        return [_summarise(results[i], spec) for i in range(len(writers))]
    finally:
        for process in [*writers, *([reader] if reader else [])]:
            if process.is_alive():
                process.kill()
            process.join(timeout=5)


def _summarise(measured: tuple[list[float], list[float]], spec: FloorSpec) -> Floor:
    per_write_ns, cpu_ns = sorted(measured[0]), measured[1]
    return Floor(
        sockets=spec.sockets,
        chunk_bytes=spec.chunk_bytes,
        us_per_write=statistics.median(per_write_ns) / 1e3,
        us_per_write_p90=per_write_ns[int(0.9 * len(per_write_ns))] / 1e3,
        cpu_us_per_write=statistics.median(cpu_ns) / 1e3,
    )


def chunk_of_size(total: int, tag: bytes) -> bytes:
    """A chunked-encoding chunk of exactly `total` bytes (framing included)."""
    body = b'data: {"id":"cmpl-' + tag + b'","choices":[{"text":"'
    payload = next(p for p in range(total, 0, -1) if len(b"%x" % p) + p + 4 <= total)
    data = (body + b"x" * payload)[:payload]
    return b"%x\r\n%b\r\n" % (len(data), data)


class _Accepting(asyncio.Protocol):
    def __init__(self, accepted: list[asyncio.Transport]) -> None:
        self.accepted = accepted

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the sim does
        self.accepted.append(transport)  # type: ignore[arg-type]


def _writer(
    index: int, core: int | None, spec: FloorSpec, ports: mp.Queue, ready: mp.Queue, go,
    start_at, offset_s: float,
) -> None:
    pin(0, core)
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, spec.nice)
    if spec.realtime:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    uvloop.run(_bursts(index, spec, ports, ready, go, start_at, offset_s))


async def _bursts(
    index: int, spec: FloorSpec, ports: mp.Queue, ready: mp.Queue, go, start_at,
    offset_s: float,
) -> None:
    accepted: list[asyncio.Transport] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Accepting(accepted), "127.0.0.1", 0, backlog=8192
    )
    ports.put((index, server.sockets[0].getsockname()[1]))
    while len(accepted) < spec.sockets:
        await asyncio.sleep(0.01)
    ready.put(("ready", index))
    while not go.is_set():
        await asyncio.sleep(0.005)
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    per_write: list[float] = []
    cpu_per_write: list[float] = []
    due = start_at.value + offset_s
    for burst in range(spec.bursts + WARMUP_BURSTS):
        due += spec.gap_s
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        data = [chunk_of_size(spec.chunk_bytes, b"%d-%d" % (burst, i)) for i in range(spec.sockets)]
        planned = [(t.write, d) for t, d in zip(accepted, data, strict=True)]
        cpu_start = cpu_clock()
        start = clock()
        stamps = []  # the sim stamps every write too
        for write, chunk in planned:
            write(chunk)
            stamps.append(clock())
        cpu_end = cpu_clock()
        if burst >= WARMUP_BURSTS:
            per_write.append((stamps[-1] - start) / len(planned))
            cpu_per_write.append((cpu_end - cpu_start) / len(planned))
    ready.put((index, (per_write, cpu_per_write)))
    server.close()


class _Draining(asyncio.Protocol):
    """Reads as the bench's client does (counting the token events), and nothing else."""

    tokens = 0

    def data_received(self, data: bytes) -> None:
        _Draining.tokens += data.count(b'"text":"')


def _reader(ports: list[int], sockets: int, cores: set[int] | None) -> None:
    if cores:
        os.sched_setaffinity(0, cores)

    async def drain_all() -> None:
        loop = asyncio.get_running_loop()
        for port in ports:
            for _ in range(sockets):
                await loop.create_connection(_Draining, "127.0.0.1", port)
        await asyncio.Event().wait()

    uvloop.run(drain_all())


def pin(pid: int, core: int | None) -> None:
    if core is not None and core in os.sched_getaffinity(0):
        os.sched_setaffinity(pid, {core})
