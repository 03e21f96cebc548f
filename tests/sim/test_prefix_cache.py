"""Prefix caching in the engine, driven step by step without sockets: the hash chain,
what a hit saves (the step-cost model's own prediction), eviction, and the usage
fields that report it."""

from __future__ import annotations

import json
import random

import pytest

from tests.sim.test_engine import Collector, make_engine, run_until_idle
from zerohop.sim.answers.api_shapes import ChatShape, CompletionShape, MessagesShape
from zerohop.sim.answers.tokenize import request_prompt_ids
from zerohop.sim.answers.tokens import count_chat_tokens, count_prompt_tokens
from zerohop.sim.engine.engine import Engine
from zerohop.sim.engine.prefix_cache import chain_hashes
from zerohop.sim.sequence import Sequence

pytestmark = pytest.mark.unit

BLOCK = 16


def tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 32000) for _ in range(n)]


def submit_ids(
    engine: Engine, sink: Collector, rid: str, ids: list[int], out: int = 1, at: int = 0,
    adapter: str | None = None,
) -> Sequence:
    seq = Sequence(
        request_id=rid, prompt_tokens=len(ids), target_output=out, max_tokens=out, sink=sink,
        arrival_ns=at, adapter=adapter,
        block_hashes=chain_hashes(ids, engine.pool.block_size, adapter=adapter),
    )
    engine.submit(seq)
    return seq


def ttft_s(seq: Sequence) -> float:
    assert seq.first_token_ns is not None
    return (seq.first_token_ns - seq.arrival_ns) / 1e9


# --- the hash chain -------------------------------------------------------------------
def test_the_same_prefix_gives_the_same_hashes_and_a_new_block_a_new_branch() -> None:
    head = tokens(1, 4 * BLOCK)
    a = chain_hashes([*head, *tokens(2, 2 * BLOCK)], BLOCK)
    b = chain_hashes([*head, *tokens(3, 2 * BLOCK)], BLOCK)
    assert a[:4] == b[:4] and a[4] != b[4] and a[5] != b[5]
    assert chain_hashes(head, BLOCK) == a[:4]


def test_a_different_first_block_shares_no_block_even_with_equal_later_blocks() -> None:
    tail = tokens(5, 3 * BLOCK)
    a = chain_hashes([*tokens(6, BLOCK), *tail], BLOCK)
    b = chain_hashes([*tokens(7, BLOCK), *tail], BLOCK)
    assert len(a) == len(b) == 4 and not set(a) & set(b)


def test_only_full_blocks_are_hashed_and_adapters_never_share() -> None:
    ids = tokens(8, 3 * BLOCK + 5)
    assert len(chain_hashes(ids, BLOCK)) == 3
    assert len(chain_hashes(ids[: BLOCK - 1], BLOCK)) == 0
    assert len(chain_hashes(ids, BLOCK, limit_tokens=2 * BLOCK + 3)) == 2
    assert not set(chain_hashes(ids, BLOCK, adapter="sql")) & set(chain_hashes(ids, BLOCK))


@pytest.mark.parametrize(("api", "body", "count"), [
    ("chat", {"messages": [{"role": "system", "content": "be brief, ok"},
                           {"role": "user", "content": "a b. c"}]}, None),
    ("messages", {"system": "you are terse.", "messages": [{"role": "user", "content": "hi"}]},
     None),
    ("completions", {"prompt": ["one two, three", "ignored"]}, 4),
    ("completions", {"prompt": [[5, 6, 7, 8]]}, 4),
])
def test_request_prompt_ids_are_as_many_as_the_usage_counts(
    api: str, body: dict[str, object], count: int | None
) -> None:
    ids = request_prompt_ids(api, body)
    if api == "completions":
        assert len(ids) == count == count_prompt_tokens(body["prompt"])
    else:
        system = body.get("system")
        assert len(ids) == count_chat_tokens(body["messages"], system=system)  # type: ignore[arg-type]


def test_an_anthropic_system_prompt_keys_like_a_chat_system_message() -> None:
    system = " ".join(f"rule{i} applies." for i in range(100))
    chat = request_prompt_ids("chat", {"messages": [{"role": "system", "content": system},
                                                    {"role": "user", "content": "x"}]})
    anthropic = request_prompt_ids("messages", {"system": system,
                                                "messages": [{"role": "user", "content": "y"}]})
    shared = chain_hashes(chat, BLOCK)[:10]
    assert chain_hashes(anthropic, BLOCK)[:10] == shared


# --- what a hit costs -------------------------------------------------------------------
def test_a_cached_half_prompt_costs_the_prefill_of_the_other_half() -> None:
    engine, sink = make_engine(), Collector()
    head = tokens(10, 1024)
    cold = submit_ids(engine, sink, "cold", [*head, *tokens(11, 1024)])
    now = run_until_idle(engine)
    warm = submit_ids(engine, sink, "warm", [*head, *tokens(12, 1024)], at=now)
    run_until_idle(engine, start=now)

    scale = engine.engine_config.time_scale
    cold_model = engine.step_cost.step_s([(0, 2048)])[0] * scale
    warm_model = engine.step_cost.step_s([(1024, 1024)])[0] * scale
    assert cold.num_cached == 0 and warm.num_cached == 1024
    assert ttft_s(cold) == pytest.approx(cold_model, abs=2e-9)
    assert ttft_s(warm) == pytest.approx(warm_model, abs=2e-9)
    assert ttft_s(warm) < 0.6 * ttft_s(cold)
    assert engine.stats.prefix_cache_queries_total == 4096
    assert engine.stats.prefix_cache_hits_total == 1024


def test_a_fully_cached_prompt_still_computes_its_last_block() -> None:
    engine, sink = make_engine(), Collector()
    ids = tokens(13, 64 * BLOCK)
    submit_ids(engine, sink, "a", ids)
    now = run_until_idle(engine)
    again = submit_ids(engine, sink, "b", ids, at=now)
    run_until_idle(engine, start=now)
    assert again.num_cached == len(ids) - BLOCK
    assert ttft_s(again) == pytest.approx(
        engine.step_cost.step_s([(len(ids) - BLOCK, BLOCK)])[0], abs=2e-9)


def test_without_prefix_caching_the_repeat_costs_a_full_prefill() -> None:
    engine, sink = make_engine(enable_prefix_caching=False), Collector()
    ids = tokens(14, 2048)
    submit_ids(engine, sink, "a", ids)
    now = run_until_idle(engine)
    again = submit_ids(engine, sink, "b", ids, at=now)
    run_until_idle(engine, start=now)
    assert engine.prefix_cache is None and again.num_cached == 0
    assert ttft_s(again) == pytest.approx(engine.step_cost.step_s([(0, 2048)])[0], abs=2e-9)
    assert engine.stats.prefix_cache_queries_total == 0


def test_running_sequences_share_cached_blocks_in_the_pool() -> None:
    engine, sink = make_engine(num_gpu_blocks=1000), Collector()
    head = tokens(15, 40 * BLOCK)
    submit_ids(engine, sink, "first", [*head, *tokens(16, 8)], out=4)
    now = run_until_idle(engine)
    pool = engine.pool
    assert pool.free_blocks == pool.num_blocks  # finished: its cached blocks count as free
    seqs = [submit_ids(engine, sink, f"s{i}", [*head, *tokens(20 + i, 8)], out=50, at=now)
            for i in range(5)]
    end = engine.simulate_step(now)
    assert end is not None and all(s.num_cached == 40 * BLOCK for s in seqs)
    # 40 shared blocks held once, plus one private block each for its own tail
    assert pool.used_blocks == 40 + 5
    run_until_idle(engine, start=end)
    assert pool.free_blocks == pool.num_blocks


# --- eviction -----------------------------------------------------------------------
def hit_rate(working_set: int, *, blocks: int, rounds: int = 6) -> float:
    """Requests cycle through `working_set` distinct 256-token prefixes, one at a time."""
    engine, sink = make_engine(num_gpu_blocks=blocks), Collector()
    prefixes = [tokens(100 + i, 16 * BLOCK) for i in range(working_set)]
    now = 0
    for r in range(rounds):
        for i, prefix in enumerate(prefixes):
            submit_ids(engine, sink, f"{r}-{i}", [*prefix, *tokens(1000 * r + i, 8)], at=now)
            now = run_until_idle(engine, start=now)
    assert len(sink.finished) == rounds * working_set and not sink.errors
    stats = engine.stats
    return stats.prefix_cache_hits_total / stats.prefix_cache_queries_total


def test_a_pool_too_small_for_the_working_set_evicts_what_would_hit() -> None:
    small = hit_rate(2, blocks=64)  # 2 prefixes x 16 blocks fit 64 blocks
    big = hit_rate(8, blocks=64)  # 8 x 16 do not: LRU evicts each before it returns
    roomy = hit_rate(8, blocks=1024)
    assert small > 0.8 and roomy > 0.8
    assert big < 0.05


def test_eviction_takes_a_freed_prompt_from_its_tail_so_its_head_still_hits() -> None:
    engine, sink = make_engine(num_gpu_blocks=30), Collector()
    head = tokens(40, 20 * BLOCK)
    submit_ids(engine, sink, "a", [*head, *tokens(41, 4)])  # 21 blocks, 20 of them cached
    now = run_until_idle(engine)
    # b's 14 blocks fit the 30-block pool only by evicting 4 of a's 20 cached blocks
    submit_ids(engine, sink, "b", tokens(42, 14 * BLOCK))
    now = run_until_idle(engine, start=now)
    again = submit_ids(engine, sink, "c", [*head, *tokens(43, 4)], at=now)
    run_until_idle(engine, start=now)
    assert again.num_cached == 16 * BLOCK


def test_random_traffic_with_preemption_returns_every_block() -> None:
    engine, sink = make_engine(num_gpu_blocks=120, max_num_seqs=16), Collector()
    rng = random.Random(3)
    heads = [tokens(200 + i, rng.randrange(1, 30) * BLOCK) for i in range(6)]
    now = 0
    for i in range(80):
        ids = [*rng.choice(heads), *tokens(300 + i, rng.randrange(1, 40))]
        submit_ids(engine, sink, str(i), ids, out=rng.randrange(1, 60), at=now)
        for _ in range(rng.randrange(0, 4)):
            now = engine.simulate_step(now) or now
    run_until_idle(engine, start=now)
    cache = engine.prefix_cache
    assert cache is not None and len(sink.finished) == 80 and not sink.errors
    assert engine.stats.preemptions_total > 0 and engine.stats.prefix_cache_hits_total > 0
    assert engine.pool.free_blocks == engine.pool.num_blocks
    assert cache.evictable_blocks == cache.resident_blocks <= engine.pool.num_blocks


# --- usage fields ---------------------------------------------------------------------
def data_lines(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]


def test_openai_usage_carries_the_cached_prompt_tokens() -> None:
    for shape in (ChatShape("r", "m", 1, include_usage=True),
                  CompletionShape("r", "m", 1, include_usage=True)):
        usage = json.loads(data_lines(shape.tail_events(40, 2, "stop", True, 32))[0])["usage"]
        assert usage["prompt_tokens_details"] == {"cached_tokens": 32}
        body = json.loads(shape.final_body(" a b", 40, 2, "stop", 0))
        assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


def test_anthropic_usage_carries_cache_read_input_tokens() -> None:
    shape = MessagesShape("r", "claude", prompt_tokens=40, cached_tokens=16)
    start = json.loads(data_lines(shape.head_events())[0])
    assert start["message"]["usage"]["cache_read_input_tokens"] == 16
    delta = json.loads(data_lines(shape.tail_events(40, 2, "stop", True, 32))[1])
    assert delta["type"] == "message_delta" and delta["usage"]["cache_read_input_tokens"] == 32
    body = json.loads(shape.final_body(" a b", 40, 2, "stop", 32))
    assert body["usage"]["cache_read_input_tokens"] == 32
