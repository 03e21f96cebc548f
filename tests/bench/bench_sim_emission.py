"""Benchmark: the sim's own emission lag at high stream counts (zerohop issue 3).

Starts the sim pinned to one CPU core, drives N concurrent streams from a separate client
process (asyncio raw sockets, keep-alive, closed loop), discards a warm-up, and prints:

* achieved tokens/s (client-counted content events and the sim's own counter),
* the sim's emission lag — token write time minus the step's modelled end — p50/p99/
  p99.9/max over every token of the measured window (exact to 1 µs, from the sim's
  /zerohop/stats), and its event-loop lag,
* the per-request maximum lag distribution from the ground truth.

Goal: p99 < 2 ms at 500 streams and >= 20k tokens/s on one core. Figures measured on a
shared machine are noisy: run it more than once before believing a number.

    python tests/bench/bench_sim_emission.py --streams 500 --duration 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from zerohop.sim.launcher import start_sim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument(
        "--model",
        default="llama-3.2-3b",
        help="3B on an H100 models ~45k tokens/s at 500 streams; the 8B "
        "model is compute-bound near 20k tokens/s at that batch",
    )
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument(
        "--sim-core",
        type=int,
        default=-1,
        help="pin the sim to this CPU (default: no pinning; the sim is "
        "single-threaded, so it never uses more than one core)",
    )
    parser.add_argument("--client-core", type=int, default=-1)
    parser.add_argument(
        "--sim-nice",
        type=int,
        default=-10,
        help="scheduling priority for the sim (needs privileges for < 0; "
        "on a shared machine other processes otherwise preempt it)",
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="zerohop-bench-"))
    ground_truth = workdir / "ground_truth.jsonl"
    sim_args = [
        "--gpu",
        args.gpu,
        "--model",
        args.model,
        "--max-num-seqs",
        str(max(args.streams, 1) + 12),
    ]
    with start_sim(sim_args, ground_truth=ground_truth) as sim:
        _pin(sim.pid, args.sim_core)
        _renice(sim.pid, args.sim_nice)
        print(
            f"sim {sim.url} pid {sim.pid} (core {args.sim_core}; -1 = not pinned); "
            f"{args.streams} streams, {args.gpu} + {args.model}, "
            f"prompt {args.prompt_tokens} tok, {args.max_tokens} tok answers"
        )
        queue: mp.Queue[dict[str, Any]] = mp.Queue()
        load = ClientLoad(sim.port, args.streams, args.warmup, args.duration,
                          args.prompt_tokens, args.max_tokens, args.model, sim.url)
        client = mp.Process(target=_client_process, args=(load, args.client_core, queue))
        client.start()
        sim_process = psutil.Process(sim.pid)
        time.sleep(args.warmup)
        cpu_before = sim_process.cpu_times()
        result = queue.get(timeout=args.duration + 120)
        cpu_after = sim_process.cpu_times()
        client.join(timeout=30)
        cpu_s = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
        result["sim_cpu_s"] = cpu_s
    _report(result, result.pop("sim_stats"), ground_truth, result["measure_start_wall"])


def _pin(pid: int, core: int) -> None:
    cores = os.sched_getaffinity(0)
    if core in cores:
        os.sched_setaffinity(pid, {core})


def _renice(pid: int, nice: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError as exc:
        print(f"(could not renice the sim to {nice}: {exc})")


def _get_json(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as response:
        return json.loads(response.read())


# --- the client process ------------------------------------------------------------
@dataclass(frozen=True)
class ClientLoad:
    """What the client process drives: `streams` closed-loop streams against the sim."""

    port: int
    streams: int
    warmup: float
    duration: float
    prompt: int
    max_tokens: int
    model: str
    url: str


def _client_process(load: ClientLoad, core: int, queue: mp.Queue) -> None:
    _pin(0, core)
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    result = runner(_drive(load))
    queue.put(result)


async def _drive(load: ClientLoad) -> dict[str, Any]:
    port, streams, warmup, duration = load.port, load.streams, load.warmup, load.duration
    model, prompt, max_tokens, url = load.model, load.prompt, load.max_tokens, load.url
    body = json.dumps(
        {
            "model": model,
            "prompt": list(range(prompt)),
            "max_tokens": max_tokens,
            "stream": True,
            "ignore_eos": True,
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    request_bytes = head + body
    counters = {"tokens": 0, "requests": 0, "errors": 0}
    state = {"measuring": False}
    start = time.monotonic()
    stop_at = start + warmup + duration

    async def one_stream(index: int) -> None:
        await asyncio.sleep(index * 0.002)  # ramp up over ~1 s
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.monotonic() < stop_at:
            writer.write(request_bytes)
            tail = b""
            while True:
                data = await reader.read(65536)
                if not data:
                    counters["errors"] += 1
                    return
                if state["measuring"]:
                    counters["tokens"] += data.count(b'"text":"')
                tail = (tail + data)[-7:]
                if tail.endswith(b"0\r\n\r\n"):
                    break
            if state["measuring"]:
                counters["requests"] += 1
        writer.close()

    tasks = [asyncio.create_task(one_stream(i)) for i in range(streams)]
    await asyncio.sleep(warmup)
    loop = asyncio.get_running_loop()
    sim_before = await loop.run_in_executor(None, _get_json, url + "/zerohop/stats")
    await loop.run_in_executor(None, _get_json, url + "/zerohop/stats/reset", "POST")
    measure_start_wall = time.time()
    state["measuring"] = True
    t0 = time.monotonic()
    await asyncio.sleep(duration)
    state["measuring"] = False
    elapsed = time.monotonic() - t0
    sim_after = await loop.run_in_executor(None, _get_json, url + "/zerohop/stats")
    tokens = counters["tokens"]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    sim_tokens = (
        sim_after["engines"][0]["generation_tokens"] - sim_before["engines"][0]["generation_tokens"]
    )
    return {
        "client_tokens_per_s": tokens / elapsed,
        "sim_tokens_per_s": sim_tokens / elapsed,
        "requests": counters["requests"],
        "errors": counters["errors"],
        "elapsed_s": elapsed,
        "measure_start_wall": measure_start_wall,
        "sim_stats": sim_after,  # the window's end, before the client's streams are cut
    }


# --- report --------------------------------------------------------------------------
def _report(
    result: dict[str, Any],
    stats: dict,
    ground_truth: Path,
    since_wall: float,
) -> None:
    lag = stats["emission_lag"]
    engine = stats["engines"][0]
    wake = engine["step_wake_lag"]
    print(
        f"achieved: {result['client_tokens_per_s']:,.0f} tokens/s at the client, "
        f"{result['sim_tokens_per_s']:,.0f} tokens/s in the sim "
        f"({result['requests']:.0f} requests finished, {result['errors']:.0f} errors, "
        f"{result['elapsed_s']:.1f} s measured)"
    )
    tokens = result["sim_tokens_per_s"] * result["elapsed_s"]
    print(
        f"sim CPU: {result['sim_cpu_s']:.2f} s over {result['elapsed_s']:.1f} s "
        f"({100 * result['sim_cpu_s'] / result['elapsed_s']:.0f}% of one core), "
        f"{1e6 * result['sim_cpu_s'] / max(tokens, 1):.1f} µs per token (incl. the send syscall)"
    )
    print(
        f"emission lag over {lag['n']:,.0f} tokens: p50 {lag['p50_ms']:.3f} ms, "
        f"p90 {lag['p90_ms']:.3f} ms, p99 {lag['p99_ms']:.3f} ms, "
        f"p99.9 {lag['p999_ms']:.3f} ms, max {lag['max_ms']:.3f} ms, "
        f"mean {lag['mean_ms']:.3f} ms"
    )
    print(
        f"step clock wake-up lag (part of every token's lag): p50 {wake['p50_ms']:.3f} ms, "
        f"p99 {wake['p99_ms']:.3f} ms, max {wake['max_ms']:.3f} ms"
    )
    print(
        f"engine: {engine['steps']} steps, {engine['resyncs']} resyncs (steps > 50 ms late), "
        f"{engine['running']} running / {engine['waiting']} waiting at the window's end"
    )
    maxima = []
    for line in ground_truth.read_text().splitlines():
        record = json.loads(line)
        in_window = (record.get("arrival_ts") or 0) >= since_wall
        if in_window and record["outcome"] == "ok" and record["max_emission_lag_ms"]:
            maxima.append(record["max_emission_lag_ms"])
    if maxima:
        maxima.sort()
        p99 = maxima[int(0.99 * (len(maxima) - 1))]
        print(
            f"ground truth: {len(maxima)} completed requests; per-request max lag median "
            f"{statistics.median(maxima):.3f} ms, p99 {p99:.3f} ms"
        )
    goal = lag["p99_ms"] < 2.0 and result["sim_tokens_per_s"] >= 20_000
    print(f"goal (p99 < 2 ms at >= 20k tokens/s): {'met' if goal else 'NOT met'}")


if __name__ == "__main__":
    main()
