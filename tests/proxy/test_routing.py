"""The layer's routing policies: round robin in order, least loaded to the idlest,
prefix affinity to the replica that served the prompt's longest prefix."""

from __future__ import annotations

import pytest

from zerohop.proxy.proxy import LayerConfig
from zerohop.proxy.routing import (
    BLOCK_CHARS,
    LeastLoaded,
    PrefixAffinity,
    RoundRobin,
    UpstreamLoad,
    block_chain,
    make_router,
    prompt_text,
)

pytestmark = pytest.mark.unit

SYSTEM = "You are a careful assistant. " * 40  # ~1.1k characters: several whole blocks


def chat(*contents: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": c} for c in contents]}


def test_round_robin_takes_each_upstream_in_turn() -> None:
    router = RoundRobin(UpstreamLoad(3))
    assert [router.choose(None) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_loaded_picks_the_idlest() -> None:
    load = UpstreamLoad(3)
    load.in_flight[:] = [3, 0, 2]
    router = LeastLoaded(load)
    assert router.choose(None) == 1
    load.in_flight[:] = [1, 4, 0]
    assert router.choose(None) == 2


def test_least_loaded_spreads_ties_in_turn() -> None:
    router = LeastLoaded(UpstreamLoad(3))  # all idle: every choice is a tie
    assert [router.choose(None) for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def test_prefix_affinity_sends_a_repeated_prefix_to_the_same_replica() -> None:
    load = UpstreamLoad(2)
    router = PrefixAffinity(load)
    first = router.choose(chat(SYSTEM + "question one"))
    load.started(first)  # it is busy now: least loaded would pick the other
    again = router.choose(chat(SYSTEM + "a different question entirely"))
    assert again == first
    assert router.matched_blocks == len(SYSTEM) // BLOCK_CHARS


def test_prefix_affinity_sends_a_new_prefix_to_the_least_loaded() -> None:
    load = UpstreamLoad(2)
    router = PrefixAffinity(load)
    first = router.choose(chat(SYSTEM + "q"))
    load.started(first)
    other = router.choose(chat("Another system prompt altogether. " * 40 + "q"))
    assert other != first and router.matched_blocks == 0
    short = router.choose(chat("hi"))  # no whole block: nothing to match
    assert router.matched_blocks == 0 and short == other  # the idle one (load 0 vs 1)


def test_prefix_affinity_follows_the_longest_match() -> None:
    load = UpstreamLoad(2)
    router = PrefixAffinity(load)
    short_doc, long_doc = SYSTEM, SYSTEM + "Chapter two. " * 60
    a = router.choose(chat(short_doc))
    load.started(a)
    b = router.choose(chat("unrelated " * 200))  # -> the other replica
    load.started(b)
    load.started(b)
    deeper = block_chain(prompt_text(chat(long_doc)))[len(SYSTEM) // BLOCK_CHARS:]
    router.remember(deeper, b)  # b holds the longer prefix, a still the shorter one
    assert router.choose(chat(long_doc + "?")) == b  # longest chain beats the shorter's a


def test_prefix_affinity_table_is_bounded() -> None:
    router = PrefixAffinity(UpstreamLoad(2), table_entries=10)
    for i in range(20):
        router.choose(chat(f"{i:04d}" * 200))
    assert router.remembered == 10


def test_block_chain_chains_whole_blocks() -> None:
    text = "a" * BLOCK_CHARS * 3 + "tail"
    chain = block_chain(text)
    assert len(chain) == 3  # the partial tail block does not count
    changed = block_chain("b" + text[1:])
    assert all(x != y for x, y in zip(chain, changed, strict=True))  # block 0 names all
    assert block_chain(text[: BLOCK_CHARS * 2]) == chain[:2]


def test_prompt_text_reads_every_api_shape() -> None:
    assert "hello" in prompt_text({"model": "m", "prompt": "hello"})
    assert "7 8 9" in prompt_text({"model": "m", "prompt": [7, 8, 9]})
    anthropic = {"model": "m", "system": "sys", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "part"}]}]}
    text = prompt_text(anthropic)
    assert text.index("sys") < text.index("part")
    assert prompt_text(None) == "" and prompt_text({"model": "m"}) == "m\x1e"
    assert prompt_text({"model": "a", "prompt": "x"}) != prompt_text({"model": "b", "prompt": "x"})


def test_unknown_route_and_unparsed_affinity_are_refused() -> None:
    with pytest.raises(ValueError, match="route"):
        make_router("random", 2)
    with pytest.raises(ValueError, match="route"):
        LayerConfig(upstreams=("http://127.0.0.1:1",), route="random")
    with pytest.raises(ValueError, match="no-parse"):
        LayerConfig(upstreams=("http://127.0.0.1:1",), route="prefix_affinity", parse=False)
    with pytest.raises(ValueError, match="upstream"):
        LayerConfig(upstreams=())
