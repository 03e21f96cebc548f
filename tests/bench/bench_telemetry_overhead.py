"""Does sampling telemetry disturb what the client measures? TTFT error vs ground truth.

A paced SSE server (a subprocess: first content after 50 ms, then 100 tokens/s) stamps,
with perf_counter_ns, when it finished reading each request and when it wrote the first
content chunk, and sends both stamps in its last event. A gevent raw-socket client
(read as data arrives, timestamp, keep bytes: the Locust hot path) runs N concurrent
streams. Client error = client TTFT − server TTFT, per request (perf_counter is one
system-wide clock on Linux, so both processes' stamps compare).

Settings, interleaved in rounds so drift hits all alike: telemetry off; NVML + the
server's /metrics (a vLLM-sized exposition) + loadgen at 100 ms and at 10 ms, with the
samplers in the agent process (default) and in real threads of the client process.
Prints mean/p50/p99 error per setting and its delta to "off". A script, not a test:

    python tests/bench/bench_telemetry_overhead.py [--streams 32] [--seconds 4] [--rounds 2]
    python tests/bench/bench_telemetry_overhead.py --nvml-costs   # per-call NVML cost

Numbers from a shared 2-core machine are noisy: compare settings within one run only.
"""

from __future__ import annotations

import gevent.monkey

gevent.monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import gevent.socket  # noqa: E402

from zerohop.core.records import ClockAnchor  # noqa: E402
from zerohop.telemetry.recorder import TelemetryRecorder  # noqa: E402
from zerohop.telemetry.spec import parse_telemetry_spec  # noqa: E402

SERVER = textwrap.dedent(r'''
    import asyncio, json, sys, time
    TTFT_S, TOKENS, TOKEN_S = 0.05, 64, 0.01
    METRICS = "".join(
        f'vllm:request_latency_seconds_bucket{{le="{b}",model_name="m",engine="{e}"}} {i}\n'
        for e in range(8) for i, b in enumerate([0.01 * 2 ** k for k in range(30)] + ["+Inf"]))
    METRICS = "# TYPE vllm:request_latency_seconds histogram\n" + METRICS + \
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        t_req = time.perf_counter_ns()
        if head.startswith(b"GET /metrics"):
            body = METRICS.encode()
            writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain(); writer.close(); return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Connection: close\r\n\r\n")
        await asyncio.sleep(TTFT_S)
        t_first = time.perf_counter_ns()
        writer.write(b'data: {"choices":[{"text":"tok"}]}\n\n')
        for _ in range(TOKENS - 1):
            await asyncio.sleep(TOKEN_S)
            writer.write(b'data: {"choices":[{"text":"tok"}]}\n\n')
        stamps = json.dumps({"req": t_req, "first": t_first}).encode()
        writer.write(b"data: " + stamps + b"\n\ndata: [DONE]\n\n")
        await writer.drain(); writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())
''')

REQUEST = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
           b"\r\nContent-Length: 2\r\n\r\n{}")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.nvml_costs:
        return nvml_call_costs()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        metrics = f"http://127.0.0.1:{port}/metrics"
        settings: list[tuple[str, str, str]] = [("off", "none", "process")]
        for interval in ("0.1", "0.01"):
            spec = f"nvml:interval={interval},prom={metrics}:interval={interval},loadgen"
            for mode in ("process", "thread"):
                settings.append((f"{mode} @ {float(interval) * 1000:g} ms", spec, mode))
        errors: dict[str, list[float]] = {name: [] for name, _, _ in settings}
        rows: dict[str, int] = {name: 0 for name, _, _ in settings}
        run_once(port, 0.5, args.streams)  # warm up
        for _ in range(args.rounds):
            for name, spec, mode in settings:
                errs, n_rows = measure(port, spec, mode, args.seconds, args.streams)
                errors[name] += errs
                rows[name] += n_rows
        report(errors, rows, args)
    finally:
        server.kill()
        server.wait()
    return 0


def measure(port: int, spec: str, mode: str, seconds: float, streams: int
            ) -> tuple[list[float], int]:
    with tempfile.TemporaryDirectory() as tmp:
        recorder = TelemetryRecorder(parse_telemetry_spec(spec), Path(tmp),
                                     anchor=ClockAnchor.now(), mode=mode)  # type: ignore[arg-type]
        recorder.start()
        gevent.sleep(0.5)  # let the samplers reach their cadence before measuring
        errs = run_once(port, seconds, streams)
        out = recorder.stop()
        import pyarrow.parquet as pq

        return errs, pq.read_metadata(out).num_rows


def run_once(port: int, seconds: float, streams: int) -> list[float]:
    deadline = time.perf_counter() + seconds
    errors: list[float] = []

    def user(offset_s: float) -> None:
        gevent.sleep(offset_s)  # spread the streams: no thundering herd at t=0
        while time.perf_counter() < deadline:
            err = one_request(port)
            if err is not None:
                errors.append(err)

    gevent.joinall([gevent.spawn(user, 0.7 * i / streams) for i in range(streams)])
    return errors


def one_request(port: int) -> float | None:
    """Client TTFT minus server TTFT for one streamed request, in ms."""
    sock = gevent.socket.create_connection(("127.0.0.1", port))
    try:
        sent = time.perf_counter_ns()
        sock.sendall(REQUEST)
        first: int | None = None
        chunks = []
        while True:
            data = sock.recv(65536)
            now = time.perf_counter_ns()
            if not data:
                break
            if first is None and b'"text"' in data:
                first = now
            chunks.append(data)
    finally:
        sock.close()
    body = b"".join(chunks)
    marker = body.rfind(b'data: {"req"')
    if first is None or marker < 0:
        return None
    stamps = json.loads(body[marker + 6 : body.index(b"\n", marker)])
    return ((first - sent) - (stamps["first"] - stamps["req"])) / 1e6


def report(errors: dict[str, list[float]], rows: dict[str, int], args: argparse.Namespace
           ) -> None:
    print(f"python {platform.python_version()}, {args.streams} streams, "
          f"{args.rounds} rounds x {args.seconds:g} s per setting "
          "(TTFT 50 ms, 100 tok/s, 64 tokens)")
    print("client TTFT error vs server ground truth, ms (client - server):")
    print(f"{'setting':18} {'n':>6} {'mean':>8} {'p50':>8} {'p99':>8} {'d_p50':>8} "
          f"{'d_p99':>8} {'rows':>7}")
    base = _stats(errors["off"])
    for name, errs in errors.items():
        s = _stats(errs)
        print(f"{name:18} {len(errs):6d} {s['mean']:8.3f} {s['p50']:8.3f} {s['p99']:8.3f} "
              f"{s['p50'] - base['p50']:+8.3f} {s['p99'] - base['p99']:+8.3f} {rows[name]:7d}")


def nvml_call_costs(repeats: int = 20) -> int:
    """How long each NVML read takes on GPU 0 (median and max of `repeats`, ms): the
    reason PCIe throughput has its own thread."""
    from zerohop.telemetry.nvml_api import PynvmlApi

    api = PynvmlApi()
    try:
        api.init()
    except Exception as exc:
        print(f"NVML not available: {exc}")
        return 1
    h = api.device_handle(0)
    calls = {
        "utilization_rates": lambda: api.utilization_rates(h),
        "memory_info": lambda: api.memory_info(h),
        "temperature_c": lambda: api.temperature_c(h),
        "power_usage_w": lambda: api.power_usage_w(h),
        "field_values(power)": lambda: api.field_values(h, [185, 186]),
        "clock_mhz(SM)": lambda: api.clock_mhz(h, 1),
        "clocks_event_reasons": lambda: api.clocks_event_reasons(h),
        "pcie_link_generation": lambda: api.pcie_link_generation(h),
        "pcie_throughput(RX)": lambda: api.pcie_throughput_bytes_per_s(h, 1),
        "gpm_sample": lambda: api.gpm_free(api.gpm_sample(h)),
    }
    print(f"NVML call cost on {api.device_name(h)}, {repeats} calls each (ms):")
    for name, call in calls.items():
        times = []
        try:
            for _ in range(repeats):
                t0 = time.perf_counter()
                call()
                times.append((time.perf_counter() - t0) * 1000)
        except Exception as exc:
            print(f"  {name:24} error: {exc}")
            continue
        print(f"  {name:24} median {statistics.median(times):8.3f}  max {max(times):8.3f}")
    api.shutdown()
    return 0


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"mean": float("nan"), "p50": float("nan"), "p99": float("nan")}
    return {
        "mean": statistics.fmean(ordered),
        "p50": ordered[len(ordered) // 2],
        "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--nvml-costs", action="store_true",
                        help="instead: time each NVML read on GPU 0")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
