"""The sim's pooling endpoints, driven without sockets: the answer's shapes (vectors of a
fixed dimension, rerank results best first with top_n honoured, scores, usage) and the
cost — prefill only, each text a sequence batched with the engine's other work."""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.sim.test_engine import Collector, make_engine, run_until_idle, submit
from zerohop.sim.answers.tokens import count_text_tokens
from zerohop.sim.engine.engine import Engine
from zerohop.sim.serving.http_server import HttpRequest
from zerohop.sim.serving.pooling import (
    EMBEDDING_DIMENSIONS,
    POOLING_PATHS,
    PoolingError,
    embedding_vector,
    read_pooling_body,
    relevance_score,
    serve_pooling,
)

pytestmark = pytest.mark.unit

DOCS = ["alpha beta gamma", "delta epsilon", "zeta eta theta iota", "kappa", "lambda mu"]


@dataclass
class Wire:
    """A connection that keeps what the sim sends."""

    sent: list[tuple[int, bytes]] = field(default_factory=list)
    on_lost: Any = None

    def send(self, status: int, body: bytes, *_: Any, **__: Any) -> None:
        self.sent.append((status, body))


def post(engine: Engine, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST `body` to `path`, run the engine until idle, return the one reply."""
    wire = Wire()
    request = HttpRequest("POST", path, path, {}, {}, json.dumps(body).encode(), 0, 0, True)
    serve_pooling(wire, request, routes={"m": (engine, None)},  # type: ignore[arg-type]
                  request_id="r", extra_headers=[])
    run_until_idle(engine)
    ((status, raw),) = wire.sent
    return status, json.loads(raw)


def test_embeddings_are_fixed_size_unit_vectors_of_the_text_with_usage() -> None:
    status, answer = post(make_engine(), "/v1/embeddings", {"model": "m", "input": DOCS})
    assert status == 200 and answer["object"] == "list"
    assert [d["index"] for d in answer["data"]] == list(range(len(DOCS)))
    for text, item in zip(DOCS, answer["data"], strict=True):
        vector = item["embedding"]
        assert len(vector) == EMBEDDING_DIMENSIONS and vector == embedding_vector(text)
        assert sum(v * v for v in vector) == pytest.approx(1.0, abs=1e-4)
    tokens = sum(count_text_tokens(t) for t in DOCS)
    assert answer["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens,
                               "completion_tokens": 0}
    assert embedding_vector("alpha") != embedding_vector("beta")


def test_base64_vectors_decode_to_the_same_floats() -> None:
    _, answer = post(make_engine(), "/v1/embeddings",
                     {"model": "m", "input": "one text", "encoding_format": "base64"})
    (item,) = answer["data"]
    floats = struct.unpack(f"<{EMBEDDING_DIMENSIONS}f", base64.b64decode(item["embedding"]))
    assert floats == pytest.approx(embedding_vector("one text"), abs=1e-6)


def test_rerank_answers_top_n_best_first_and_score_every_pair() -> None:
    _, answer = post(make_engine(), "/v1/rerank",
                     {"model": "m", "query": "which one", "documents": DOCS, "top_n": 3})
    results = answer["results"]
    scores = {i: relevance_score("which one", d) for i, d in enumerate(DOCS)}
    best = sorted(scores, key=lambda i: -scores[i])[:3]
    assert [r["index"] for r in results] == best
    assert [r["relevance_score"] for r in results] == sorted(scores.values(), reverse=True)[:3]
    assert all(0 <= r["relevance_score"] < 1 for r in results)
    assert results[0]["document"] == {"text": DOCS[best[0]]}
    query = count_text_tokens("which one")  # a cross-encoder reads it beside each document
    assert answer["usage"]["total_tokens"] == sum(count_text_tokens(d) + query for d in DOCS)
    _, everything = post(make_engine(), "/v1/rerank",
                         {"model": "m", "query": "which one", "documents": DOCS})
    assert len(everything["results"]) == len(DOCS)
    _, all_of_them = post(make_engine(), "/v1/rerank",  # vLLM's default top_n, 0: all
                          {"model": "m", "query": "which one", "documents": DOCS, "top_n": 0})
    assert all_of_them["results"] == everything["results"]
    _, scored = post(make_engine(), "/v1/score",
                     {"model": "m", "text_1": "which one", "text_2": DOCS})
    assert [d["score"] for d in scored["data"]] == [scores[i] for i in range(len(DOCS))]


@pytest.mark.parametrize(("path", "body", "status", "says"), [
    ("/v1/embeddings", {"model": "m", "input": []}, 400, "non-empty list"),
    ("/v1/embeddings", {"input": ["x"]}, 400, "`model` is required"),
    ("/v1/embeddings", {"model": "other", "input": ["x"]}, 404, "does not exist"),
    ("/v1/rerank", {"model": "m", "documents": ["x"]}, 400, "`query`"),
    ("/v1/rerank", {"model": "m", "query": "q", "documents": ["x"], "top_n": -1}, 400,
     "top_n"),
    ("/v1/embeddings", {"model": "m", "input": ["word " * 200_000]}, 400,
     "maximum context length"),
])
def test_bad_requests_are_openai_shaped_errors(path: str, body: dict[str, Any], status: int,
                                               says: str) -> None:
    got, answer = post(make_engine(), path, body)
    assert got == status and says in answer["error"]["message"]
    with pytest.raises(PoolingError):
        read_pooling_body("/v1/score", {"text_1": ["a", "b"], "text_2": ["c"]})
    assert set(POOLING_PATHS) == {"/v1/embeddings", "/v1/rerank", "/v1/score"}


def test_a_pooled_text_costs_its_prefill_and_no_decode() -> None:
    # the same prompt as a generation: the embedding ends when the generation's first
    # token does, and the generation's later tokens cost decode steps it does not pay
    prompt = "word " * 999
    tokens = count_text_tokens(prompt)
    engine, sink = make_engine(), Collector()
    submit(engine, sink, "generation", prompt=tokens, out=20)
    generation_end = run_until_idle(engine)
    first_token = sink.times["generation"][0]
    pooled_engine = make_engine()
    wire = Wire()
    request = HttpRequest("POST", "/v1/embeddings", "/v1/embeddings", {}, {},
                          json.dumps({"model": "m", "input": [prompt]}).encode(), 0, 0, True)
    serve_pooling(wire, request, routes={"m": (pooled_engine, None)},  # type: ignore[arg-type]
                  request_id="r", extra_headers=[])
    pooled_end = run_until_idle(pooled_engine)
    assert wire.sent and wire.sent[0][0] == 200
    assert pooled_end == first_token < generation_end


def test_a_batch_of_texts_is_prefilled_together_with_other_work() -> None:
    # eight short texts fit one step's token budget: one step, not eight
    engine, sink = make_engine(), Collector()
    submit(engine, sink, "generation", prompt=64, out=4)  # running beside the batch
    wire = Wire()
    request = HttpRequest("POST", "/v1/embeddings", "/v1/embeddings", {}, {},
                          json.dumps({"model": "m", "input": ["short text"] * 8}).encode(),
                          0, 0, True)
    serve_pooling(wire, request, routes={"m": (engine, None)},  # type: ignore[arg-type]
                  request_id="r", extra_headers=[])
    end_of_first_step = engine.simulate_step(0)
    assert end_of_first_step is not None
    assert wire.sent and wire.sent[0][0] == 200  # all eight answered after one step
    assert sink.times["generation"] == [end_of_first_step]  # prefilled in the same step
