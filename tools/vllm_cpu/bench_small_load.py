"""Time the vLLM CPU tier's pieces and a small load against it; prints figures.

Run with zerohop's python (the vLLM venv must exist: tools/vllm_cpu/setup_env.sh):

    python tools/vllm_cpu/bench_small_load.py [--streams 16] [--max-tokens 64] [--rounds 3]

Measures: a cold model build (into a temp folder) and a warm one (the cached model),
server startup to /health 200, then `--rounds` bursts of `--streams` concurrent streamed
chat completions of exactly `--max-tokens` tokens (ignore_eos): TTFT percentiles (send ->
first non-empty content chunk), end-to-end time and output tokens/s. A plain thread per
stream and http.client: this is a check of the engine, not of zerohop's client. On a
shared 2-core machine the numbers are noisy; compare runs, not single figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests/vllm_cpu.py: the vLLM fixture's own code

from tests.vllm_cpu import (  # noqa: E402
    adapters_in,
    build_tiny_model,
    default_model_dir,
    probe_env,
    start_vllm,
)


@dataclass(frozen=True)
class StreamResult:
    status: int
    ttft_s: float
    e2e_s: float
    content_events: int
    output_tokens: int


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    started = time.perf_counter()
    probe = probe_env(setup=False)
    if probe.env is None:
        print(f"no vLLM env at {probe.venv}: run tools/vllm_cpu/setup_env.sh", file=sys.stderr)
        return 1
    print(f"env probe: {time.perf_counter() - started:.2f} s ({probe.venv})")

    with tempfile.TemporaryDirectory(prefix="zerohop-tiny-") as scratch:
        started = time.perf_counter()
        build_tiny_model(probe.env, Path(scratch) / "tiny-model")
        print(f"model build, cold: {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    model_dir = build_tiny_model(probe.env, default_model_dir())
    print(f"model build, cached: {time.perf_counter() - started:.2f} s ({model_dir})")

    started = time.perf_counter()
    with start_vllm(probe.env, model_dir, lora_adapters=adapters_in(model_dir)) as server:
        print(f"server start to /health 200: {time.perf_counter() - started:.1f} s")
        for round_index in range(args.rounds):
            _report_round(round_index, server.port, args.streams, args.max_tokens)
    return 0


def _report_round(round_index: int, port: int, streams: int, max_tokens: int) -> None:
    results: list[StreamResult] = []
    lock = threading.Lock()

    def run_one(index: int) -> None:
        result = _one_stream(port, index, max_tokens)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run_one, args=(i,)) for i in range(streams)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall_s = time.perf_counter() - started
    ttfts_ms = sorted(result.ttft_s * 1000 for result in results)
    e2es_ms = sorted(result.e2e_s * 1000 for result in results)
    tokens = sum(result.output_tokens for result in results)
    if any(result.status != 200 for result in results):
        print(f"round {round_index}: HTTP statuses {[r.status for r in results]}")
    complete = sum(1 for r in results if r.output_tokens == max_tokens)
    # Under load vLLM may pack several tokens into one chunk (its output collector
    # merges what the client has not read yet): events < tokens is real, not an error.
    events = sum(r.content_events for r in results)
    print(
        f"round {round_index}: {streams} streams x {max_tokens} tokens in {wall_s:.2f} s | "
        f"TTFT ms p50 {_percentile(ttfts_ms, 50):.0f} p90 {_percentile(ttfts_ms, 90):.0f} "
        f"max {ttfts_ms[-1]:.0f} | e2e ms p50 {statistics.median(e2es_ms):.0f} "
        f"max {e2es_ms[-1]:.0f} | {tokens / wall_s:.0f} output tok/s | "
        f"{complete}/{streams} with exactly {max_tokens} tokens | "
        f"tokens per content event {tokens / max(events, 1):.2f}"
    )


def _one_stream(port: int, index: int, max_tokens: int) -> StreamResult:
    body = json.dumps(
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": f"Request {index}: write a long story."}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    sent = time.perf_counter()
    connection.request(
        "POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    first_content: float | None = None
    events = 0
    output_tokens = 0
    for raw_line in response:
        line = raw_line.strip()
        if not line.startswith(b"data:") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        if chunk.get("usage"):
            output_tokens = int(chunk["usage"]["completion_tokens"])
        if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
            events += 1
            if first_content is None:
                first_content = time.perf_counter()
    finished = time.perf_counter()
    connection.close()
    return StreamResult(
        status=response.status,
        ttft_s=(first_content or finished) - sent,
        e2e_s=finished - sent,
        content_events=events,
        output_tokens=output_tokens,
    )


def _percentile(sorted_values: list[float], percent: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    return statistics.quantiles(sorted_values, n=100, method="inclusive")[int(percent) - 1]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=16, help="concurrent streams a round")
    parser.add_argument("--max-tokens", type=int, default=64, help="output tokens a stream")
    parser.add_argument("--rounds", type=int, default=3, help="bursts to run")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
