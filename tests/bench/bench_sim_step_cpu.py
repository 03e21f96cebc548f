"""Benchmark: the sim's own Python CPU per token, with the socket writes taken out.

bench_sim_emission.py measures the sim under a real load, beside the loopback write
floor; on a shared 2-core machine its CPU figure moves by microseconds between runs.
This one runs the same serving path in one process and without sockets or an event
loop: N closed-loop streams of `--answer` tokens (the bench's /v1/completions request)
go through the real HTTP parsing, `SimApp`, `StreamingResponse`s and the engine's
steps (`Engine.simulate_step`: plan, prepare each token's chunk, write, complete),
over connections whose transport's `write` appends to a list (a C call, no syscall),
so what it prints is the sim's CPU per token beyond the write itself: the part issue
19's goal bounds (≤ 3 µs). A stream that ends sends its next request at once, as the
bench's client does. It prints the median of `--repeats` timed runs, and the user CPU
per token of the whole path, of the step alone and of the requests' own work.

    python tests/bench/bench_sim_step_cpu.py --streams 1000 --steps 600
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from emission_client import ClientLoad, request_bytes

from zerohop.sim.config import SimConfig
from zerohop.sim.engine.engine import Engine
from zerohop.sim.serving.app import SimApp
from zerohop.sim.serving.http_server import HttpConnection, RunNow


class _Transport:
    """The transport surface the sim's connections use; a write is a C call that
    keeps nothing (`len`)."""

    write = staticmethod(len)
    is_closing = staticmethod(bool)  # bool() is False: never closing

    def get_extra_info(self, name: str) -> None:
        return None

    def close(self) -> None:
        raise AssertionError("the driver's streams never close")


class _Connection(HttpConnection):
    """Notes each answered request, for the driver to send the next one."""

    answered: ClassVar[list[_Connection]] = []

    def finish(self, close: bool = False) -> None:
        super().finish(close)
        _Connection.answered.append(self)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=600, help="timed steps per repeat")
    parser.add_argument("--answer", type=int, default=256, help="tokens per answer")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="llama-3.2-3b")
    args = parser.parse_args()
    load = ClientLoad((0,), args.streams, 0.0, 64, args.answer, args.model)
    request = request_bytes(load, 0)
    with tempfile.TemporaryDirectory() as tmp:
        config = SimConfig.model_validate({
            "models": [{"gpu": "h100-sxm", "model": args.model,
                        "engine": {"max_num_seqs": args.streams + 12}}],
            "ground_truth": str(Path(tmp) / "ground_truth.jsonl"),
        })
        app = SimApp(config)
        app.ground_truth.path = None  # records kept in memory (json.dumps skipped)
        engine = app.engines[0]
        turns = RunNow()
        conns = []
        for _ in range(args.streams):
            conn = _Connection(app, turns)
            conn.connection_made(_Transport())  # type: ignore[arg-type]
            conns.append(conn)
        now = time.perf_counter_ns()
        for i, conn in enumerate(conns):  # staggered, as a ramped-up load is
            conn.data_received(request)
            for _ in range(3 if i % (args.streams // args.answer + 1) == 0 else 0):
                now = engine.simulate_step(now) or now
        gc.freeze()
        gc.set_threshold(50_000, 50, 1000)
        now = _run(engine, request, args.answer * 2, now)[1]  # warm-up
        results = []
        for _ in range(args.repeats):
            results.append(_run(engine, request, args.steps, now))
            now = results[-1][1]
    per_token = [r[0] for r in results]
    step_only = [r[2] for r in results]
    print(f"{args.streams} streams, {args.answer}-token answers, {args.steps} steps x "
          f"{args.repeats}: user CPU per token {statistics.median(per_token):.3f} µs "
          f"(runs {', '.join(f'{v:.3f}' for v in per_token)}); the steps alone "
          f"{statistics.median(step_only):.3f} µs, the requests' own work "
          f"{statistics.median(per_token) - statistics.median(step_only):.3f} µs")


def _run(engine: Engine, request: bytes, steps: int, now: int) -> tuple[float, int, float]:
    """(µs per token, the clock after, µs per token of the steps alone)."""
    tokens0 = engine.stats.generation_tokens_total
    cpu = time.process_time_ns
    answered = _Connection.answered
    step_ns = 0
    start = cpu()
    for _ in range(steps):
        t0 = cpu()
        now = engine.simulate_step(now) or now
        step_ns += cpu() - t0
        for conn in answered:  # each stream that ended sends its next request at once
            conn.data_received(request)
        answered.clear()
    total = cpu() - start
    tokens = engine.stats.generation_tokens_total - tokens0
    return total / 1e3 / tokens, now, step_ns / 1e3 / tokens


if __name__ == "__main__":
    main()
