"""Golden streams through the whole measurement path: SSE parser, protocol decoder and
`measure.build_record`, as a request's records are built after a real stream.

Every fixture with a `record` section (tests/fixtures/streams/README.md) is replayed as
one read per SSE block (the bytes up to and including each blank line), each read a
millisecond after the previous one. The record must then say: TTFT lands on the read
holding the first generated token (`first_token_in`), never on a role-only or empty
chunk, a comment, a ping or a usage chunk; TTFO on the read holding the first answer
token after any thinking (`first_answer_in`, the first token when absent); how many
content events there were; the output, input and reasoning tokens and where the output
count came from; how many tool calls the response made; the outcome.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import END_COMPLETE, RawExchange
from zerohop.client.measure import StreamDecode, build_record
from zerohop.core.records import ClockAnchor, RequestRecord

pytestmark = pytest.mark.unit

STREAMS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
CONTRACTS = sorted(p for p in STREAMS_DIR.glob("*.json") if "record" in json.loads(p.read_text()))
NS_PER_READ = 1_000_000  # 1 ms between reads: TTFT in ms is then the read's 1-based index
# Servers zerohop did not write, each with at least one contract fixture.
SERVERS = ("sglang", "tgi", "llamacpp", "ollama", "openrouter", "litellm", "openai", "anthropic")


def sse_blocks(body: bytes) -> list[bytes]:
    """The body cut after every blank line, bytes kept exactly (LF streams only)."""
    blocks, start = [], 0
    while (end := body.find(b"\n\n", start)) >= 0:
        blocks.append(body[start : end + 2])
        start = end + 2
    if start < len(body):
        blocks.append(body[start:])
    return blocks


def replay(path: Path) -> tuple[RequestRecord, list[bytes], dict[str, Any]]:
    spec = json.loads(path.read_text(encoding="utf-8"))
    blocks = sse_blocks(path.with_suffix(".sse").read_bytes())
    reads = [((i + 1) * NS_PER_READ, block) for i, block in enumerate(blocks)]
    exchange = RawExchange(
        sent_ns=0,
        status=200,
        headers={"content-type": "text/event-stream"},
        reads=reads,
        end_ns=(len(reads) + 1) * NS_PER_READ,
        end=END_COMPLETE,
    )
    record = RequestRecord(request_id="r1", workload="golden", api=spec["api"], model="m")
    build_record(record, exchange, create_api_adapter(spec["api"]), ClockAnchor(0, 0))
    return record, blocks, spec


def test_every_foreign_server_has_a_contract_fixture() -> None:
    stems = {p.stem for p in CONTRACTS}
    missing = [s for s in SERVERS if not any(stem.startswith(s) for stem in stems)]
    assert not missing, f"no contract fixture for {missing}"


@pytest.mark.parametrize("path", CONTRACTS, ids=lambda p: p.stem)
def test_first_token_is_the_first_generated_content(path: Path) -> None:
    record, blocks, spec = replay(path)
    want = spec["record"]["first_token_in"]
    first = next(i for i, block in enumerate(blocks) if want.encode() in block)
    assert record.ttft_ms == pytest.approx((first + 1) * NS_PER_READ / 1e6)
    assert record.first_content_ts == pytest.approx((first + 1) * NS_PER_READ / 1e9)


@pytest.mark.parametrize("path", CONTRACTS, ids=lambda p: p.stem)
def test_first_output_token_is_the_first_answer_after_thinking(path: Path) -> None:
    record, blocks, spec = replay(path)
    want = spec["record"].get("first_answer_in", spec["record"]["first_token_in"])
    first = next(i for i, block in enumerate(blocks) if want.encode() in block)
    assert record.ttfo_ms == pytest.approx((first + 1) * NS_PER_READ / 1e6)
    assert record.ttft_ms is not None and record.ttfo_ms >= record.ttft_ms


@pytest.mark.parametrize("path", CONTRACTS, ids=lambda p: p.stem)
def test_reasoning_tokens_and_tool_calls(path: Path) -> None:
    record, _, spec = replay(path)
    assert record.reasoning_tokens == spec["record"].get("reasoning_tokens", 0)
    assert record.tool_calls == spec["record"].get("tool_calls", 0)


def test_the_shapes_of_thinking_and_tool_calls_have_contracts() -> None:
    """Every way a server streams thinking or a tool call is replayed above."""
    records = {p.stem: json.loads(p.read_text())["record"] for p in CONTRACTS}
    thinking = {s for s, r in records.items() if r.get("first_answer_in")}
    tools = {s for s, r in records.items() if r.get("tool_calls")}
    assert {"vllm_chat_reasoning_logprobs", "vllm_chat_reasoning_tool_calls"} <= thinking
    assert {"anthropic_thinking", "anthropic_thinking_tool_use"} <= thinking
    assert {"openai_chat_tool_calls", "anthropic_tool_use_first"} <= tools
    assert records["openai_chat_reasoning_usage"]["reasoning_tokens"] > 0


@pytest.mark.parametrize("path", CONTRACTS, ids=lambda p: p.stem)
def test_counts_usage_and_outcome(path: Path) -> None:
    record, _, spec = replay(path)
    want = spec["record"]
    assert record.outcome == want["outcome"]
    assert record.content_events == want["content_events"]
    assert len(record.itl_ms) == want["content_events"] - 1
    assert all(itl > 0 for itl in record.itl_ms)  # one event per read here: no 0-ms gap
    assert record.output_tokens == want["output_tokens"]
    assert record.token_source == want["token_source"]
    assert record.input_tokens == want["input_tokens"]
    assert record.error_type == want.get("error_type")
    if record.outcome == "ok":
        assert record.e2e_ms is not None and record.ttft_ms is not None
        if want["output_tokens"] >= 2:
            expected = (record.e2e_ms - record.ttft_ms) / (want["output_tokens"] - 1)
            assert record.tpot_ms == pytest.approx(expected)


def test_a_role_only_first_chunk_never_times_the_first_token() -> None:
    """The shape `vllm bench serve` times as its first token (docs/ttft-vs-vllm-bench.md):
    zerohop must land one read later, on the content."""
    path = STREAMS_DIR / "vllm_chat_usage.json"
    record, blocks, _ = replay(path)
    assert b'"role":"assistant","content":""' in blocks[0]
    assert record.ttft_ms == pytest.approx(2 * NS_PER_READ / 1e6)


@pytest.mark.parametrize("path", [p for p in STREAMS_DIR.glob("*.json")
                                  if p.with_suffix(".sse").exists()], ids=lambda p: p.stem)
def test_decoding_started_on_the_hot_path_ends_as_a_whole_decode_would(path: Path) -> None:
    """The client decodes a stream's first reads while it is open (to know when content
    began) and the rest after it ends, each byte once (`StreamDecode`): the record, the
    answer text and the tool calls must be those of one decode of the whole stream,
    wherever the content began."""
    spec = json.loads(path.read_text(encoding="utf-8"))
    adapter = create_api_adapter(spec["api"])
    blocks = sse_blocks(path.with_suffix(".sse").read_bytes())
    reads = [((i + 1) * NS_PER_READ, block) for i, block in enumerate(blocks)]

    def record_of(split: bool) -> tuple[dict[str, Any], list[str], list[Any]]:
        exchange = RawExchange(sent_ns=0, status=200, reads=list(reads), end=END_COMPLETE,
                               end_ns=(len(reads) + 1) * NS_PER_READ)
        answer: list[str] = []
        calls: list[Any] = []
        scan = None
        if split:
            scan = StreamDecode(adapter, answer=answer, collect_calls=True)
            for ts, payload in reads:
                if scan.feed_early(ts, payload):
                    break
        record = RequestRecord(request_id="r1", workload="golden", api=spec["api"], model="m")
        build_record(record, exchange, adapter, ClockAnchor(0, 0), answer=answer,
                     tool_calls=calls, scan=scan)
        return record.to_row(), answer, calls

    whole, split = record_of(split=False), record_of(split=True)
    assert split == whole
