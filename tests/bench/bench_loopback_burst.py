"""Benchmark: the floor under the sim's emission lag — a burst of small loopback writes.

At a step's end the sim writes one ~200-byte chunk to each of N sockets, back to back,
and the last token of the burst waits for all the others. This measures that burst
without the sim: N keep-alive TCP connections on loopback, the writer pinned to one
core, a uvloop reader draining them on another, one burst every `--gap-ms`. Printed:
the median and p90 cost per write, for chunks that are

* `fresh`  built just before the burst (what the sim does: `prepare_token`),
* `cached` read from a per-socket cache of 90 chunks (megabytes at 500 sockets,
           the sim's old design), which arrive cold in the CPU cache.

    python tests/bench/bench_loopback_burst.py --sockets 500 --gap-ms 10 26

Run it more than once: these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import statistics
import time

import uvloop

PIECES = 90  # word pieces per stream in the sim's vocabulary of token texts
CHUNK_BODY = b'data: {"id":"cmpl-0","object":"text_completion","choices":[{"text":"' + b"x" * 120


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sockets", type=int, default=500)
    parser.add_argument("--bursts", type=int, default=400)
    parser.add_argument("--gap-ms", type=float, nargs="+", default=[10.0, 26.0])
    parser.add_argument("--writer-core", type=int, default=0)
    parser.add_argument("--reader-core", type=int, default=1)
    args = parser.parse_args()
    for gap_ms in args.gap_ms:
        for chunks in ("fresh", "cached"):
            per_write = uvloop.run(_bursts(args, gap_ms / 1e3, chunks))
            per_write.sort()
            print(
                f"{args.sockets} sockets, a burst every {gap_ms:g} ms, {chunks} chunks: "
                f"median {statistics.median(per_write) / 1e3:.2f} µs per write, "
                f"p90 {per_write[int(0.9 * len(per_write))] / 1e3:.2f} µs"
            )


class _Server(asyncio.Protocol):
    def __init__(self, accepted: list[asyncio.Transport]) -> None:
        self.accepted = accepted

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.accepted.append(transport)  # type: ignore[arg-type]


async def _bursts(args: argparse.Namespace, gap_s: float, chunks: str) -> list[float]:
    """Per-write cost (ns) of each burst after a warm-up of 50."""
    _pin(args.writer_core)
    accepted: list[asyncio.Transport] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Server(accepted), "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    reader = mp.Process(target=_reader, args=(port, args.sockets, args.reader_core))
    reader.start()
    try:
        while len(accepted) < args.sockets:
            await asyncio.sleep(0.01)
        cache = [
            [_frame(bytes([65 + (i + j) % 26]) + CHUNK_BODY) for j in range(PIECES)]
            for i in range(args.sockets)
        ]
        clock = time.perf_counter_ns
        per_write = []
        for burst in range(args.bursts + 50):
            await asyncio.sleep(gap_s)
            if chunks == "fresh":
                data = [_frame(b"%d" % i + CHUNK_BODY) for i in range(len(accepted))]
            else:
                data = [cache[i][burst % PIECES] for i in range(len(accepted))]
            planned = [(t.write, d) for t, d in zip(accepted, data, strict=True)]
            start = clock()
            stamps = []  # the sim stamps every write
            for write, data in planned:
                write(data)
                stamps.append(clock())
            if burst >= 50:
                per_write.append((stamps[-1] - start) / len(planned))
        return per_write
    finally:
        reader.kill()
        reader.join()
        server.close()


def _frame(payload: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def _reader(port: int, sockets: int, core: int) -> None:
    _pin(core)

    async def drain_all() -> None:
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(sockets)]

        async def drain(reader: asyncio.StreamReader) -> None:
            while await reader.read(65536):
                pass

        await asyncio.gather(*(drain(r) for r, _ in streams))

    uvloop.run(drain_all())


def _pin(core: int) -> None:
    if 0 <= core < (os.cpu_count() or 1):  # not sched_getaffinity: the reader inherits the pin
        os.sched_setaffinity(0, {core})


if __name__ == "__main__":
    main()
