"""The layer under test: a real extra hop whose cost shows, which streams without
buffering and passes faults through."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import pytest

from zerohop.sim.launcher import SimProcess, start_proxy

from .conftest import MODEL
from .wire import RawResponse, request

pytestmark = pytest.mark.integration

BODY = {"model": MODEL, "prompt": "hello", "max_tokens": 12, "stream": True, "ignore_eos": True}


@pytest.fixture(scope="module")
def layer(sim: SimProcess) -> Iterator[SimProcess]:
    with start_proxy(sim.url, ["--per-request-ms", "25", "--reserialise"]) as proxy:
        yield proxy


def first_content_ms(r: RawResponse) -> float:
    first = next(t for t, data in r.reads if b'"text":" ' in data)
    return (first - r.sent_at) * 1e3


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_the_layer_adds_its_cost(sim: SimProcess, layer: SimProcess) -> None:
    direct = statistics.median(
        first_content_ms(request(sim.url, "/v1/completions", BODY)) for _ in range(5)
    )
    through = [request(layer.url, "/v1/completions", BODY) for _ in range(5)]
    via = statistics.median(first_content_ms(r) for r in through)
    assert via - direct >= 20  # 25 ms of per-request work (medians, noisy machine)
    reported = float(through[0].headers["server-timing"].split("dur=")[1])
    assert reported >= 25


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_streams_pass_through_unbuffered(layer: SimProcess) -> None:
    r = request(layer.url, "/v1/completions", BODY)
    assert r.complete and r.data_lines()[-1] == "[DONE]"
    content_reads = [t for t, data in r.reads if b'"text":" ' in data]
    assert len(content_reads) >= 8  # tokens arrive one by one, not in one buffer
    span_ms = (content_reads[-1] - content_reads[0]) * 1e3
    assert span_ms > 40  # ~11 decode steps of ~7 ms


def test_faults_pass_through_the_layer(layer: SimProcess) -> None:
    dropped = request(
        layer.url, "/v1/completions", BODY, headers={"x-zerohop-fault": "drop_mid;after=2"}
    )
    assert dropped.status == 200 and not dropped.complete
    reset = request(layer.url, "/v1/completions", BODY, headers={"x-zerohop-fault": "reset"})
    assert reset.reset and not reset.complete
    limited = request(layer.url, "/v1/completions", BODY, headers={"x-zerohop-fault": "http_429"})
    assert limited.status == 429 and limited.headers["retry-after"] == "1"


def test_upstream_down_is_a_502() -> None:
    with start_proxy("http://127.0.0.1:9") as proxy:
        r = request(proxy.url, "/v1/completions", BODY)
    assert r.status == 502


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_max_concurrency_queues_requests(sim: SimProcess) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with start_proxy(sim.url, ["--max-concurrency", "1"]) as proxy:
        body = dict(BODY, max_tokens=20)
        with ThreadPoolExecutor(2) as pool:
            first, second = pool.map(
                lambda _: request(proxy.url, "/v1/completions", body), range(2)
            )
    ends = sorted([first.reads[-1][0], second.reads[-1][0]])
    starts = sorted(
        [
            first_content_ms(first) / 1e3 + first.sent_at,
            first_content_ms(second) / 1e3 + second.sent_at,
        ]
    )
    assert starts[1] >= ends[0] - 0.002  # the second only started once the first ended
