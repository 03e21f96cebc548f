"""zerohop's TTFT against the wire, on a server it did not write.

docs/ttft-vs-vllm-bench.md claims zerohop's TTFT is within 0.05-0.06 ms (median) and
0.14-0.15 ms (p99 of |zerohop − wire|) of a loopback packet capture. Here a paced chat
server written for this test (tests/loadgen/paced_sse_server.py: a role-only chunk, 3 ms,
then a content chunk every 20 ms, as decode steps) is driven by `zerohop run` while the
loopback traffic is captured with kernel timestamps; zerohop's median and p99 must hold
within 3× of the claim plus the floor a plain kernel-stamped client reached in the same
run on the same core (tests/wire_ttft.py). The same judgement must catch two clients
that are wrong: one that times the role-only chunk (3 ms early), and one whose loop is
held by a blocking sleep after every read (later tokens merge into the first one's
read, tens of ms late). The server and every client run at nice −10 (root): on a
machine shared with other work the docs' figures are for a client that has its core
(the floor still carries the rest of the machine's load). A request whose first token
waited through a stall of the clients' core that an independent witness saw (the
hypervisor or the machine took the core: a CI machine once held three of 183 requests
40 ms so) is set aside for every client alike, at most 5 % of zerohop's
(tests/wire_ttft.py); the held-loop control shows that a client's own lateness is not.
tests/vllm/test_ttft_vs_wire_vllm.py runs the same check on the vLLM tier's server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.paced_sse_server import MODEL
from tests.wire_ttft import CLIENT_NICE, ProbeClient, measure_against_wire

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("paced_sse_server.py")
DURATION_S = 10
RATE_RPS = 20
WORKLOAD = f"""\
kind: short_query_flood
name: paced
input_tokens: 16
max_tokens: 6
ignore_eos: true
load: {{kind: open, rate_rps: {RATE_RPS}, arrival: poisson}}
"""
HOLD_MS = 60.0  # past the role gap and two token gaps (or one, with the server slowed 2x)
PROBES = [
    ProbeClient("floor", requests=DURATION_S * RATE_RPS, interval_s=1 / RATE_RPS),
    ProbeClient("role", requests=DURATION_S * 4, interval_s=0.25),
    ProbeClient("hold", requests=DURATION_S * 4, interval_s=0.25, hold_ms=HOLD_MS),
]
BODY = {"model": MODEL, "stream": True, "max_tokens": 6,
        "messages": [{"role": "user", "content": "how late is the first token"}]}


def cores() -> tuple[int | None, int | None]:
    """(the server's core, the clients' core) where the machine has two."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)


@pytest.fixture()
def paced_server(tmp_path: Path) -> Iterator[int]:
    server_cpu, _ = cores()
    port_file = tmp_path / "port"
    def preexec() -> None:  # the clients' priority, so its pacing holds too
        os.nice(CLIENT_NICE)
        if server_cpu is not None:
            os.sched_setaffinity(0, {server_cpu})

    process = subprocess.Popen([sys.executable, str(SERVER), str(port_file)],
                               preexec_fn=preexec)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert process.poll() is None, "the paced server exited"
            assert time.monotonic() < deadline, "the paced server did not start"
            time.sleep(0.05)
        yield int(port_file.read_text())
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_zerohop_ttft_matches_the_wire_and_wrong_clients_are_caught(
        paced_server: int, tmp_path: Path) -> None:
    workload = tmp_path / "paced.yaml"
    workload.write_text(WORKLOAD)
    judged = measure_against_wire(
        paced_server, f"http://127.0.0.1:{paced_server}", MODEL, workload, DURATION_S,
        PROBES, BODY, tmp_path, cores()[1])
    assert judged["zerohop"].requests >= 0.5 * RATE_RPS * DURATION_S
    assert judged["zerohop"].judgeable, f"the machine was too busy: {judged['zerohop']}"
    assert judged["zerohop"].holds, judged["zerohop"]
    assert not judged["role"].holds, judged["role"]  # times the role-only chunk
    assert not judged["hold"].holds, judged["hold"]  # a held loop
