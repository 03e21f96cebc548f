"""How fast bytes become stream items: SSE parser + OpenAI chat decoder, one core.

Builds a realistic vLLM chat stream (role chunk, content chunks, finish chunk, usage
chunk, [DONE]; 1,000 events by default) and decodes it repeatedly, fed three ways:
whole (one read), in 1,000 equal reads cut anywhere (as a network read would), and one
read per event. Prints median events/second with the spread (min..max) over the repeats,
and the parser alone for comparison. A script, not a test:

    python tests/bench/bench_sse.py [--events 1000] [--repeats 50]

Figures from a shared machine are noisy; compare medians from the same host only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.protocols import StreamItem
from zerohop.client.sse import SSEParser

_WORDS = ("the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", " café")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    stream, frames = build_vllm_chat_stream(args.events)
    reads = split_even(stream, 1000)
    cases: list[tuple[str, list[bytes]]] = [
        ("whole (1 read)", [stream]),
        (f"{len(reads)} reads, cut anywhere", reads),
        (f"{len(frames)} reads, one per event", frames),
    ]
    _check_same_items(cases)
    print(f"python {platform.python_version()} on {platform.machine()}, {args.repeats} repeats")
    print(f"stream: {args.events} events, {len(stream):,} bytes")
    print(f"{'case':34} {'what':16} {'median ev/s':>12} {'min ev/s':>12} {'max ev/s':>12}")
    for label, chunks in cases:
        for what, run in (("parser+decoder", decode_all), ("parser only", parse_only)):
            rates = measure(run, chunks, args.events, args.repeats)
            print(
                f"{label:34} {what:16} {statistics.median(rates):12,.0f} "
                f"{min(rates):12,.0f} {max(rates):12,.0f}"
            )
    return 0


def build_vllm_chat_stream(events: int) -> tuple[bytes, list[bytes]]:
    """(body, per-event frames) of a vLLM chat stream with exactly `events` events."""
    if events < 4:
        raise ValueError("events: need at least 4 (role, finish, usage, [DONE])")
    head = {
        "id": "chatcmpl-bench0123456789abcdef",
        "object": "chat.completion.chunk",
        "created": 1735689600,
        "model": "Qwen/Qwen2.5-0.5B-Instruct",
    }

    def chunk(delta: dict[str, str], finish: str | None = None) -> dict[str, object]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice]}

    content = events - 4
    payloads: list[dict[str, object]] = [chunk({"role": "assistant", "content": ""})]
    payloads += [chunk({"content": _WORDS[i % len(_WORDS)]}) for i in range(content)]
    payloads.append(chunk({"content": ""}, "length"))
    usage = {"prompt_tokens": 128, "total_tokens": 128 + content, "completion_tokens": content}
    payloads.append({**head, "choices": [], "usage": usage})
    frames = [b"data: " + json.dumps(p, separators=(",", ":")).encode() + b"\n\n" for p in payloads]
    frames.append(b"data: [DONE]\n\n")
    return b"".join(frames), frames


def split_even(data: bytes, parts: int) -> list[bytes]:
    """`parts` reads of near-equal size, cut wherever the byte count falls."""
    size = len(data)
    bounds = [size * i // parts for i in range(parts + 1)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def decode_all(chunks: list[bytes]) -> list[StreamItem]:
    parser = SSEParser()
    decoder = create_api_adapter("openai-chat").new_stream_decoder()
    items: list[StreamItem] = []
    for chunk in chunks:
        for event in parser.feed(chunk):
            items += decoder.decode_event(event)
    return items


def parse_only(chunks: list[bytes]) -> int:
    parser = SSEParser()
    return sum(len(parser.feed(chunk)) for chunk in chunks)


def measure(run: Callable[[list[bytes]], object], chunks: list[bytes], events: int, repeats: int
            ) -> list[float]:  # fmt: skip
    run(chunks)  # warm-up
    rates = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        run(chunks)
        elapsed_ns = time.perf_counter_ns() - start
        rates.append(events / (elapsed_ns / 1e9))
    return rates


def _check_same_items(cases: list[tuple[str, list[bytes]]]) -> None:
    """A benchmark of a wrong answer is worthless: every feeding must agree."""
    reference = decode_all(cases[0][1])
    for label, chunks in cases[1:]:
        if decode_all(chunks) != reference:
            raise SystemExit(f"items differ when fed as {label!r}")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=50)
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
