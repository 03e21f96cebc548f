"""Interleaved arms: each request's arm drawn with the seed — balanced, deterministic,
a session kept on one arm — and the client sending each arm to its own base URL."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.arms import ArmAssigner, format_arm_hosts, parse_arm_hosts
from zerohop.client.http_stream import Timeouts
from zerohop.client.llm_client import LLMClient
from zerohop.core.records import ClockAnchor

pytestmark = pytest.mark.unit

ARMS = ("direct", "layer")


def draws(seed: object, n: int = 1000) -> list[str]:
    assigner = ArmAssigner(ARMS, seed)
    return [assigner.next_arm() for _ in range(n)]


def test_same_seed_same_arms_other_seed_other_arms() -> None:
    assert draws(1234) == draws(1234)
    assert draws(1234) != draws(1235)


def test_arms_are_about_half_each_and_balanced_as_they_go() -> None:
    sequence = draws(7)
    counts = Counter(sequence)
    assert counts["direct"] == counts["layer"] == 500
    for start in range(0, len(sequence), 2):  # every block of two holds both arms
        assert set(sequence[start:start + 2]) == set(ARMS)
    # ... in a random order: neither arm always first (a drift within a block is shared)
    firsts = Counter(sequence[::2])
    assert 200 < firsts["direct"] < 300  # of 500 blocks
    runs = sum(1 for a, b in itertools.pairwise(sequence) if a == b)
    assert runs > 100  # not a plain alternation


def test_a_session_keeps_the_arm_of_its_first_request() -> None:
    assigner = ArmAssigner(ARMS, 3)
    first = {f"s{i}": assigner.next_arm(f"s{i}") for i in range(50)}
    assert set(first.values()) == set(ARMS)
    for _ in range(3):  # later turns, interleaved with other requests
        assigner.next_arm()
        assert all(assigner.next_arm(key) == arm for key, arm in first.items())


def test_arm_hosts_parse_and_format_round_trip() -> None:
    text = "direct=http://127.0.0.1:8000/,layer=http://127.0.0.1:8001"
    arms = parse_arm_hosts(text)
    assert arms == {"direct": "http://127.0.0.1:8000", "layer": "http://127.0.0.1:8001"}
    assert parse_arm_hosts(format_arm_hosts(arms)) == arms


@pytest.mark.parametrize("text, words", [
    ("direct", "NAME=URL"),
    ("direct=127.0.0.1:8000", "http://"),
    ("a=http://x:1,a=http://y:2", "twice"),
    (",", "no arm"),
    ("bad name=http://x:1", "NAME=URL"),
])
def test_bad_arm_hosts_name_the_part(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_arm_hosts(text)


def test_the_client_sends_each_arm_to_its_url() -> None:
    client = LLMClient("http://127.0.0.1:8000", create_api_adapter("openai-chat"), api_key=None,
                       timeouts=Timeouts(ttft_s=1, stall_s=1, total_s=1),
                       anchor=ClockAnchor.now(),
                       arm_urls={"direct": "http://127.0.0.1:8000", "layer": "http://h:9/"})
    assert client.url_of(None) == "http://127.0.0.1:8000"
    assert client.url_of("layer") == "http://h:9"
    with pytest.raises(ValueError, match="arm"):
        client.url_of("elsewhere")
