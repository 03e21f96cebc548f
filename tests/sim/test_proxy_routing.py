"""The layer in front of two engine replicas: it routes by its policy, says which
upstream it chose in its Server-Timing header, and prefix affinity sends a repeated
prompt back to the replica whose prefix cache holds it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from zerohop.sim.launcher import SimProcess, start_proxy, start_sim

from .conftest import MODEL
from .wire import RawResponse, request

pytestmark = pytest.mark.integration

SYSTEM = "You answer questions about the quarterly report in plain words. " * 30


@pytest.fixture(scope="module")
def replicas() -> Iterator[list[SimProcess]]:
    with start_sim(["--seed", "1"]) as first, start_sim(["--seed", "2"]) as second:
        yield [first, second]


def chat(question: str, system: str = SYSTEM) -> dict[str, object]:
    return {"model": MODEL, "max_tokens": 4, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": question}]}


def route_of(r: RawResponse) -> str:
    timing = r.headers["server-timing"]
    assert re.match(r"layer;dur=\d+\.\d+", timing), timing  # the layer's own cost, first
    match = re.search(r'route;desc="(r\d)"', timing)
    assert match, timing
    return match.group(1)


def cached_tokens(r: RawResponse) -> int | None:
    for line in r.data_lines():
        if line.startswith("{") and '"usage"' in line:
            usage = json.loads(line).get("usage") or {}
            details = usage.get("prompt_tokens_details") or {}
            if "cached_tokens" in details:
                return int(details["cached_tokens"])
    return None


def test_round_robin_alternates_and_says_so(replicas: list[SimProcess]) -> None:
    with start_proxy([r.url for r in replicas], ["--route", "round_robin"]) as layer:
        routes = [route_of(request(layer.url, "/v1/chat/completions", chat(f"q{i}")))
                  for i in range(4)]
    assert routes == ["r0", "r1", "r0", "r1"]


def test_prefix_affinity_returns_a_prefix_to_its_replica(replicas: list[SimProcess]) -> None:
    with start_proxy([r.url for r in replicas], ["--route", "prefix_affinity"]) as layer:
        first = request(layer.url, "/v1/chat/completions", chat("What was revenue?"))
        again = [request(layer.url, "/v1/chat/completions", chat(f"And cost {i}?"))
                 for i in range(3)]
        other = request(layer.url, "/v1/chat/completions",
                        chat("hello", system="A different application's system prompt. " * 30))
    assert first.status == 200 and first.complete
    assert {route_of(r) for r in again} == {route_of(first)}  # one replica for the prefix
    assert route_of(other) != route_of(first)  # new prefix, both idle: the next in turn
    hits = [cached_tokens(r) for r in again]  # the replica's usage: its prefix cache's gift
    assert all(h is not None and h > 0 for h in hits), hits


def test_least_loaded_spreads_an_idle_layer(replicas: list[SimProcess]) -> None:
    with start_proxy([r.url for r in replicas], ["--route", "least_loaded"]) as layer:
        routes = [route_of(request(layer.url, "/v1/chat/completions", chat(f"q{i}")))
                  for i in range(4)]
    assert sorted(routes) == ["r0", "r0", "r1", "r1"]


def test_bad_route_is_one_line_exit_2() -> None:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "zerohop.proxy", "--upstream",
                          "http://127.0.0.1:1", "--route", "prefix_affinity", "--no-parse"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "no-parse" in res.stderr.strip().splitlines()[-1]
