"""zerohop's headline claim, end to end: what its own Locust client measures is what the
target really sent, within 1 ms at p99.

Real Locust and zerohop's client stream from the embedded target, which logs when it
handed every token to the socket (`--ground-truth-token-lags`); records and ground truth
are joined on request id. Errors are client stamp − server write time: TTFT (the read
that delivered the first content), E2E (the read that delivered the terminator) and
every token's inter-token latency. The two processes get a core each where the machine
has two. A negative control holds the client's hub on purpose for longer than a token
gap, and the same check must catch it.

The floor under the client is measured in the same run: a real-time probe on the
client's core (cpu_stall_probe.py) records when the core was taken from every process
on it. On one CI machine every stream's reads came late together ~14 times in 14 s,
10-20 ms each (ITL p99 10 ms; 0.005 ms on a quiet machine of the same kind), as when
a hypervisor takes the client's virtual CPU.
Tokens written in those windows are counted, not judged; most must still be judged.

The load is sized from what this machine carries: a loopback write costs 2.9 µs on one
machine of this kind and 14.8 µs on another (tests/bench/bench_loopback_burst.py), and a
client core's read path scales with it. One client core kept p99 < 1 ms up to ~30k
content events/s where a write cost ~3 µs (tests/bench/bench_client_fidelity.py); the
test asks for a quarter of that, scaled by the write cost it measures first.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.conftest import LOADTESTS, only_run_dir
from tests.loadgen.fidelity_workload import fidelity_workload
from zerohop.analysis.client.fidelity_check import TimingErrors, timing_errors
from zerohop.sim.embedded import start_embedded_target
from zerohop.storage.selfcheck_files import read_client_timings, read_ground_truth

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOG = Path(__file__).with_name("client_hog.py")
STALL_PROBE = Path(__file__).with_name("cpu_stall_probe.py")
TOKENS = 24
DURATION_S = 14
RAMP_S = 3.0  # all users start at once: their first step is not steady state
REFERENCE_WRITE_US = 3.0
REFERENCE_EVENTS_PER_S = 30_000.0
LOAD_SHARE = 0.25
STEP_S_AT_SCALE_1 = 0.008  # the default engine's decode step at 50-200 streams


def loopback_write_us(sockets: int = 64, bursts: int = 40) -> float:
    """Median cost of one small loopback TCP write on this machine, in µs."""
    listener = socket.create_server(("127.0.0.1", 0))
    pairs = []
    try:
        for _ in range(sockets):
            client = socket.create_connection(listener.getsockname())
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            server, _ = listener.accept()
            server.setblocking(False)
            pairs.append((client, server))
        chunk, per_write = b"x" * 200, []
        for _ in range(bursts):
            started = time.perf_counter_ns()
            for client, _ in pairs:
                client.send(chunk)
            per_write.append((time.perf_counter_ns() - started) / sockets / 1e3)
            for _, server in pairs:
                while True:
                    try:
                        if not server.recv(65536):
                            break
                    except BlockingIOError:
                        break
        return statistics.median(per_write)
    finally:
        for client, server in pairs:
            client.close()
            server.close()
        listener.close()


def time_scale_for(streams: int, write_us: float) -> float:
    """Slow the engine until `streams` ask a quarter of what a client core carries here."""
    capacity = REFERENCE_EVENTS_PER_S * REFERENCE_WRITE_US / max(write_us, 0.5)
    step_s = streams / (LOAD_SHARE * capacity)
    return max(1.0, step_s / STEP_S_AT_SCALE_1)


def _pin_process(pid: int, cpu: int) -> None:
    for task in os.listdir(f"/proc/{pid}/task"):  # every thread, not only the main one
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task), {cpu})


def measure(tmp_path: Path, streams: int, *, hog: bool = False) -> TimingErrors:
    write_us = loopback_write_us()
    scale = time_scale_for(streams, write_us)
    work = tmp_path / f"{streams}{'-hog' if hog else ''}"
    work.mkdir()
    truth, workload = work / "truth.jsonl", work / "w.yaml"
    workload.write_text(fidelity_workload(TOKENS, streams))
    cpus = sorted(os.sched_getaffinity(0))
    sim_args = ["--time-scale", f"{scale:.3f}", "--max-num-seqs", "1024",
                "--ground-truth-token-lags"]
    with start_embedded_target(sim_args, ground_truth=truth) as sim:
        if len(cpus) >= 2:
            _pin_process(sim.pid, cpus[0])
        files = f"{LOADTESTS}" + (f",{HOG}" if hog else "")
        cmd = [sys.executable, "-m", "locust", "-f", files, "--headless", "-u", str(streams),
               "-r", str(streams), "-t", f"{DURATION_S}s", "--host", sim.url,
               "--workload", str(workload), "--results-dir", str(work / "results"),
               "--telemetry", "none", "--only-summary", "--loglevel", "WARNING",
               "ShortQueryFlood"]
        client_cpu = cpus[1] if len(cpus) >= 2 else cpus[0]
        step_ms = scale * STEP_S_AT_SCALE_1 * 1e3
        env = {**os.environ, "ZEROHOP_HOG_HOLD_MS": f"{2.5 * step_ms:.1f}",
               "ZEROHOP_HOG_CYCLE_MS": f"{8 * step_ms:.1f}"}
        with stall_probe(client_cpu, work / "stalls.jsonl") as unavailable:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=DURATION_S + 150, env=env,
                preexec_fn=lambda: os.sched_setaffinity(0, {client_cpu}))
        assert done.returncode in (0, 1), done.stderr[-3000:]
    print(f"{streams} streams: loopback write {write_us:.2f} µs, time scale {scale:.2f}")
    return join_errors(only_run_dir(work / "results"), truth, unavailable)


@contextlib.contextmanager
def stall_probe(cpu: int, out: Path) -> Iterator[list[tuple[float, float]]]:
    """Run cpu_stall_probe.py on `cpu` meanwhile; the list fills with its windows."""
    windows: list[tuple[float, float]] = []
    probe = subprocess.Popen([sys.executable, str(STALL_PROBE), str(cpu), str(out)])
    try:
        yield windows
    finally:
        probe.terminate()
        probe.wait(timeout=30)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    windows.extend((w["start"], w["end"]) for w in lines[1:])
    taken_ms = sum(end - start for start, end in windows) * 1e3
    print(f"core {cpu} taken {len(windows)} times, {taken_ms:.1f} ms in all "
          f"(probe real-time: {lines[0]['realtime']})")


def join_errors(run_dir: Path, truth: Path,
                unavailable: list[tuple[float, float]]) -> TimingErrors:
    """The client's errors against the ground truth, by the product's own join (the one
    `zerohop selfcheck` certifies with), leaving out tokens written while the client's
    core was taken."""
    errors = timing_errors(read_client_timings(run_dir), read_ground_truth(truth),
                           warmup_s=RAMP_S, unavailable=unavailable)
    assert errors.requests >= 50, f"only {errors.requests} requests to judge"
    assert errors.itl_unpaired == 0, "one content event per token written, one gap per pair"
    if errors.late_gaps:  # where in the stream the misses fall (the first gap: prefill to decode)
        print(f"ITL errors > 1 ms: {errors.late_gaps / errors.itl.n:.2%} of gaps; by gap index: "
              f"{list(errors.late_gaps_by_position)}")
    print(errors)
    return errors


@pytest.mark.parametrize("streams", [50, 200])
@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_client_timings_match_what_the_target_sent(tmp_path: Path, streams: int) -> None:
    errors = measure(tmp_path, streams)
    assert errors.tokens >= 20 * errors.requests  # each request's tokens were judged
    assert errors.unjudged_tokens <= 0.2 * errors.tokens, "the machine took the client's core"
    assert errors.ttft_p99_ms < 1.0, errors
    assert errors.e2e_p99_ms < 1.0, errors
    assert errors.itl_p99_ms < 1.0, errors


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_a_client_that_holds_its_loop_is_caught(tmp_path: Path) -> None:
    """The negative control: the same check, with the client's hub held for 2.5 token
    gaps in every 8."""
    errors = measure(tmp_path, 50, hog=True)
    assert max(errors.ttft_p99_ms, errors.e2e_p99_ms, errors.itl_p99_ms) > 1.0, errors
