"""The one-per-process stream reader, under real gevent (in a child process)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_reactor_reads_many_streams_and_enforces_their_deadlines() -> None:
    script = Path(__file__).with_name("reactor_scenarios.py")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60, check=True)
    data = json.loads(out.stdout)
    ends = Counter(r["end"] for r in data["results"])
    assert ends == {"complete": 20, "stall": 1, "eof": 1}, ends
    complete = [r for r in data["results"] if r["end"] == "complete"]
    for r in complete:
        assert r["payload"] == "".join(f"data: {i}\n\n" for i in range(5))
        assert r["reusable"]
        # tokens were 20 ms apart on the server: each came in its own read, under its
        # own stamp (no batching), and the stamps follow one another
        assert sorted(r["events_per_read"], reverse=True)[:5] == [1] * 5, r["events_per_read"]
        assert min(r["gaps_ms"][1:]) > 0
    # concurrent, not one stream after another: the whole took far less than the
    # streams' own durations, measured in the same run, added up
    assert data["elapsed_s"] < 0.5 * sum(r["duration_s"] for r in data["results"]), data


def test_pump_reads_between_slices_of_other_work_so_tokens_keep_their_own_stamps() -> None:
    """A greenlet busy with other CPU work calls `pump()`: each token is read as it
    arrives, before the next one lands in the socket (which would merge their stamps)."""
    import socket

    import gevent

    from zerohop.client.http_stream import RawExchange, ResponseReader, Timeouts
    from zerohop.loadgen.reactor import EpollReactor

    client, server = socket.socketpair()
    reactor = EpollReactor()
    ex = RawExchange(sent_ns=0)
    found: list[int] = []  # the stamps the content detector said yes to

    def first_data(ts: int, body: bytes) -> bool:
        if b"data:" in body:
            found.append(ts)
        return bool(found)

    reader = ResponseReader(ex, Timeouts(ttft_s=5, stall_s=5, total_s=5), 0,
                            first_content=first_data)
    waiting = gevent.spawn(reactor.read, client, reader)
    gevent.sleep(0)  # the stream is registered; from here on this greenlet never yields
    server.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"b\r\ndata: one\n\n\r\n")
    reactor.pump()
    assert len(found) == 1 and not reader.awaiting_content
    first_stamp = found[0]
    server.sendall(b"b\r\ndata: two\n\n\r\n")
    reactor.pump()
    server.sendall(b"0\r\n\r\n")
    reactor.pump()
    assert reader.done and ex.end == "complete"
    stamps = [ts for ts, _ in ex.reads]
    assert len(stamps) == 2 and stamps[0] == first_stamp < stamps[1]
    assert found == [first_stamp]  # never asked again once content was seen
    waiting.join(timeout=1)
    assert waiting.dead
    server.close()
