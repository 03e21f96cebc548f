"""Scraping a live local /metrics endpoint, and losing it mid-run."""

from __future__ import annotations

import json
import socket

import pytest

from tests.telemetry.fakes import MetricsServer, vllm_text
from zerohop.core.records import ClockAnchor
from zerohop.telemetry.samples import GAP, TelemetryClock
from zerohop.telemetry.scraper import Endpoint, PrometheusScraper, fetch_text, strip_userinfo

pytestmark = pytest.mark.integration


class Queue:
    """Server state the test moves between scrapes."""

    def __init__(self) -> None:
        self.waiting = 0
        self.prompt = 0

    def render(self) -> str:
        return vllm_text(waiting=self.waiting, running=1, kv=0.5, prompt_total=self.prompt,
                         gen_total=0, preempt_total=0,
                         ttft_buckets={"0.1": 0, "1.0": 0, "+Inf": 0})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_scrape_follows_the_server_and_a_dead_server_is_one_gap() -> None:
    state = Queue()
    server = MetricsServer(state.render)
    port = server.port
    clock = TelemetryClock(ClockAnchor.now())
    scraper = PrometheusScraper(server.url, clock, timeout_s=1.0)
    assert scraper.source == f"prom:127.0.0.1:{port}"
    rows = []
    for waiting in (0, 5, 12):
        state.waiting = waiting
        state.prompt += 100
        rows += scraper.tick(clock.now())
    assert [r.value for r in rows if r.metric == "queue_depth"] == [0.0, 5.0, 12.0]
    assert len([r for r in rows if r.metric == "prompt_tokens_per_s"]) == 2

    server.stop()
    lost = scraper.tick(clock.now()) + scraper.tick(clock.now())
    gaps = [r for r in lost if r.metric == GAP]
    assert len(gaps) == 1
    assert json.loads(gaps[0].labels) == {"reason": "connection refused"}

    server = MetricsServer(state.render, port=port)  # back on the same port
    try:
        state.prompt += 100
        back = scraper.tick(clock.now())
        closing = [r for r in back if r.metric == GAP]
        assert len(closing) == 1 and closing[0].value > 0
        assert [r.value for r in back if r.metric == "queue_depth"] == [12.0]
        # no rate across the hole: the counter baseline restarted after the gap
        assert not [r for r in back if r.metric == "prompt_tokens_per_s"]
    finally:
        server.stop()
    assert scraper.scrapes_ok == 4 and scraper.scrapes_failed == 2


def test_http_errors_and_timeouts_are_gaps_with_their_reason() -> None:
    server = MetricsServer(lambda: "x")
    clock = TelemetryClock(ClockAnchor.now())
    wrong_path = PrometheusScraper(f"http://127.0.0.1:{server.port}/nope", clock)
    rows = wrong_path.tick(clock.now())
    assert json.loads(rows[0].labels)["reason"] == "HTTP 404"
    server.stop()

    silent = socket.socket()  # accepts, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        slow = PrometheusScraper(f"http://127.0.0.1:{silent.getsockname()[1]}/metrics", clock,
                                 timeout_s=0.2)
        rows = slow.tick(clock.now())
        assert json.loads(rows[0].labels)["reason"] == "timeout after 0.2 s"
    finally:
        silent.close()


def test_fetch_reads_chunked_bodies() -> None:
    body = b"# TYPE a gauge\na 1\n"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    import threading

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(4096)
        chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
        conn.close()

    t = threading.Thread(target=serve)
    t.start()
    try:
        text = fetch_text(Endpoint.parse(f"http://127.0.0.1:{listener.getsockname()[1]}/metrics"),
                          2.0)
    finally:
        t.join(5)
        listener.close()
    assert text == body.decode()


def test_source_names_and_credentials() -> None:
    assert Endpoint.parse("http://h:9400/metrics").source == "prom:h:9400"
    assert Endpoint.parse("http://h/other").source == "prom:h:80/other"
    assert Endpoint.parse("http://[::1]:1/metrics").source == "prom:[::1]:1"
    assert strip_userinfo("http://u:pw@h:1/metrics") == "http://h:1/metrics"
    assert "pw" not in Endpoint.parse("http://u:pw@h:1/metrics").source
