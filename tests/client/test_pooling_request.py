"""Pooling requests (embeddings, rerank): the body sent, and the record made of what
came back — E2E, items and the server's input tokens, no TTFT/ITL/TPOT; a malformed
body, a 4xx and a cut-off answer are records with their outcome."""

from __future__ import annotations

import json

import pytest

from zerohop.client.http_stream import (
    END_COMPLETE,
    END_CONNECT_ERROR,
    END_EOF,
    RawExchange,
)
from zerohop.client.llm_client import RequestSpec, spec_record
from zerohop.client.pooling_request import (
    EMBEDDINGS_PATH,
    RERANK_PATH,
    PooledBody,
    build_pooled_request,
    fill_pooled_record,
)
from zerohop.client.protocols import GenerationRequest
from zerohop.core import records as rec
from zerohop.core.records import ClockAnchor, RequestRecord

pytestmark = pytest.mark.unit

MS = 1_000_000
ANCHOR = ClockAnchor(wall_ns=1_700_000_000 * 10**9, perf_ns=0)
EMBED = PooledBody("embeddings", "m", ("one text", "two texts", "three"))
RERANK = PooledBody("rerank", "m", ("a", "b", "c", "d"), query="q", top_n=2)


def new_record(body: PooledBody) -> RequestRecord:
    spec = RequestSpec(workload="w", generation=GenerationRequest(model="m", max_tokens=1,
                                                                  prompt=body.texts[0]),
                       pooled=body)
    return spec_record(spec, "r1", "openai-chat")


def exchange(status: int, body: bytes, end: str = END_COMPLETE) -> RawExchange:
    # the body in two reads, as a large JSON answer arrives
    half = len(body) // 2
    return RawExchange(sent_ns=0, status=status, reads=[(30 * MS, body[:half]),
                                                        (42 * MS, body[half:])],
                       end_ns=42 * MS, end=end)


def vectors(count: int, dims: int = 4) -> list[dict[str, object]]:
    return [{"index": i, "object": "embedding", "embedding": [0.5] * dims}
            for i in range(count)]


def test_the_embeddings_and_rerank_bodies_are_openai_and_jina_shaped() -> None:
    req = build_pooled_request(EMBED, api_key="k", request_id="r1")
    assert (req.method, req.path) == ("POST", EMBEDDINGS_PATH)
    assert json.loads(req.body) == {"model": "m", "input": list(EMBED.texts),
                                    "encoding_format": "float"}
    assert req.headers["authorization"] == "Bearer k"
    assert req.headers["x-request-id"] == "r1"
    assert req.headers["accept"] == "application/json"  # not a stream
    req = build_pooled_request(RERANK, api_key=None, request_id="r2")
    assert req.path == RERANK_PATH and "authorization" not in req.headers
    assert json.loads(req.body) == {"model": "m", "query": "q", "documents": ["a", "b", "c", "d"],
                                    "top_n": 2}
    with pytest.raises(ValueError, match="query"):
        PooledBody("rerank", "m", ("a",))
    with pytest.raises(ValueError, match="at least one"):
        PooledBody("embeddings", "m", ())


def test_an_ok_embedding_has_e2e_items_and_usage_tokens_and_no_streaming_latencies() -> None:
    record = new_record(EMBED)
    assert (record.items, record.max_tokens) == (3, None)
    answer = {"object": "list", "data": vectors(3), "model": "m",
              "usage": {"prompt_tokens": 17, "total_tokens": 17}}
    fill_pooled_record(record, exchange(200, json.dumps(answer).encode()), EMBED, ANCHOR)
    assert record.outcome == rec.OK
    assert record.e2e_ms == pytest.approx(42.0)
    assert (record.items, record.input_tokens) == (3, 17)
    assert record.ttft_ms is None and record.tpot_ms is None and record.ttfo_ms is None
    assert record.output_tokens is None and record.itl_ms == []
    row = record.to_row()  # what the results folder stores: null, never NaN or 0
    assert row["ttft_ms"] is None and row["tpot_ms"] is None and row["output_tokens"] is None
    assert row["items"] == 3 and row["e2e_ms"] == pytest.approx(42.0)


def test_rerank_reads_total_tokens_when_the_server_gives_only_that() -> None:
    record = new_record(RERANK)
    answer = {"id": "x", "model": "m", "usage": {"total_tokens": 40},
              "results": [{"index": 2, "document": {"text": "c"}, "relevance_score": 0.9},
                          {"index": 0, "document": {"text": "a"}, "relevance_score": 0.4}]}
    fill_pooled_record(record, exchange(200, json.dumps(answer).encode()), RERANK, ANCHOR)
    assert (record.outcome, record.items, record.input_tokens) == (rec.OK, 4, 40)


@pytest.mark.parametrize(("body", "answer", "says"), [
    (EMBED, b'{"data": [', "not JSON"),
    (EMBED, json.dumps({"data": vectors(2)}).encode(), "3 embeddings, got 2"),
    (EMBED, json.dumps({"data": [{"index": 0, "embedding": "x"}] * 3}).encode(),
     "not a list of numbers"),
    (EMBED, json.dumps({"data": [{"index": 0, "embedding": [1.0]}] * 3}).encode(),
     "distinct"),
    (RERANK, json.dumps({"results": [{"index": 0, "relevance_score": 0.1},
                                     {"index": 1, "relevance_score": 0.9}]}).encode(),
     "sorted"),
    (RERANK, json.dumps({"results": [{"index": 7, "relevance_score": 0.9},
                                     {"index": 1, "relevance_score": 0.1}]}).encode(),
     "below 4"),
    (RERANK, json.dumps({"results": []}).encode(), "2 results, got 0"),
])
def test_a_malformed_200_body_is_a_protocol_error(body: PooledBody, answer: bytes,
                                                  says: str) -> None:
    record = new_record(body)
    fill_pooled_record(record, exchange(200, answer), body, ANCHOR)
    assert record.outcome == rec.PROTOCOL_ERROR
    assert record.error_message is not None and says in record.error_message
    assert record.input_tokens is None and record.ttft_ms is None


def test_a_4xx_is_an_http_outcome_with_the_servers_error_type() -> None:
    record = new_record(EMBED)
    error = {"error": {"type": "BadRequestError", "message": "too long", "code": 400}}
    fill_pooled_record(record, exchange(400, json.dumps(error).encode()), EMBED, ANCHOR)
    assert (record.outcome, record.http_status) == ("http_400", 400)
    assert (record.error_type, record.error_message) == ("BadRequestError", "too long")
    assert record.items == 3 and record.ttft_ms is None and record.input_tokens is None


def test_a_cut_off_answer_and_a_refused_connection_are_not_ok() -> None:
    record = new_record(EMBED)
    fill_pooled_record(record, exchange(200, b'{"data": [', END_EOF), EMBED, ANCHOR)
    assert record.outcome == rec.INCOMPLETE_STREAM and record.e2e_ms is None
    record = new_record(EMBED)
    refused = RawExchange(sent_ns=0, end_ns=MS, end=END_CONNECT_ERROR, error="refused")
    fill_pooled_record(record, refused, EMBED, ANCHOR)
    assert (record.outcome, record.error_message) == (rec.CONNECT_ERROR, "refused")
