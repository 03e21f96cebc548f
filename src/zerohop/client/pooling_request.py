"""Pooling requests: embeddings and rerank, one JSON body each way, nothing streamed.

The request travels on the same HTTP client and clock as a stream (`http_stream`,
through `LLMClient`); its record has an E2E latency (send → the body's last byte), the
texts it carried (`items`) and the server's input tokens from the answer's `usage`
(`prompt_tokens`, else `total_tokens`: vLLM's rerank has only that one in older
versions), and no TTFT, ITL or TPOT: nothing is generated. The shapes:

* `POST /v1/embeddings` (OpenAI): `{model, input: [..], encoding_format}` →
  `{data: [{index, embedding}], usage: {prompt_tokens, total_tokens}}`;
* `POST /v1/rerank` (the Jina/Cohere shape vLLM serves): `{model, query, documents,
  top_n}` → `{results: [{index, relevance_score, document}], usage: {total_tokens}}`.

An answer that is not that shape (not JSON, a vector or result missing, an index out of
range) is a `protocol_error` record saying what was wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from zerohop.client.http_stream import RawExchange
from zerohop.client.measure import fill_exchange
from zerohop.client.protocols import HttpRequest
from zerohop.client.wire_format import base_headers, decode_error_body, encode_json
from zerohop.core import records as rec
from zerohop.core import timing
from zerohop.core.records import ClockAnchor, RequestRecord

__all__ = ["EMBEDDINGS_PATH", "RERANK_PATH", "PooledBody", "build_pooled_request",
           "fill_pooled_record"]

EMBEDDINGS_PATH = "/v1/embeddings"
RERANK_PATH = "/v1/rerank"
_PATHS = {"embeddings": EMBEDDINGS_PATH, "rerank": RERANK_PATH}


class MalformedAnswer(ValueError):
    """The 200 body is not the endpoint's answer."""


@dataclass(frozen=True)
class PooledBody:
    """What one pooling request asks: `endpoint` `embeddings` (embed `texts`) or `rerank`
    (rank `texts` against `query`, return the best `top_n`)."""

    endpoint: str
    model: str
    texts: tuple[str, ...]
    query: str | None = None
    top_n: int | None = None
    encoding_format: str = "float"

    def __post_init__(self) -> None:
        if self.endpoint not in _PATHS:
            raise ValueError(f"no pooling endpoint {self.endpoint!r} (have: {', '.join(_PATHS)})")
        if not self.texts:
            raise ValueError("a pooling request needs at least one text")
        if self.endpoint == "rerank" and self.query is None:
            raise ValueError("a rerank request needs a query")

    @property
    def items(self) -> int:
        """Inputs embedded or documents ranked: the request's batch size."""
        return len(self.texts)

    def expected_results(self) -> int:
        """Vectors or results a correct answer holds."""
        if self.endpoint == "rerank" and self.top_n is not None:
            return min(self.top_n, self.items)
        return self.items


def build_pooled_request(body: PooledBody, *, api_key: str | None, request_id: str
                         ) -> HttpRequest:
    """The POST for `body`, with the headers every zerohop request carries."""
    payload: dict[str, Any] = {"model": body.model}
    if body.endpoint == "embeddings":
        payload.update(input=list(body.texts), encoding_format=body.encoding_format)
    else:
        payload.update(query=body.query, documents=list(body.texts))
        if body.top_n is not None:
            payload["top_n"] = body.top_n
    headers = base_headers(request_id, stream=False)
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return HttpRequest("POST", _PATHS[body.endpoint], headers, encode_json(payload))


def fill_pooled_record(record: RequestRecord, exchange: RawExchange, body: PooledBody,
                       anchor: ClockAnchor, *, scheduled_perf_ns: int | None = None,
                       queue_wait_ns: int | None = None) -> RequestRecord:
    """Fill `record` (identity fields set) from a pooling exchange."""
    ex = exchange
    record.items = body.items
    record.max_tokens = None
    if fill_exchange(record, ex, anchor, decode_error_body,
                     scheduled_perf_ns=scheduled_perf_ns, queue_wait_ns=queue_wait_ns):
        return record
    if ex.end != "complete":
        record.outcome = _unfinished_outcome(ex.end)
        record.error_message = rec.truncate_message(ex.error or f"the answer ended ({ex.end}) "
                                                    "before its body was complete")
        return record
    record.e2e_ms = timing.e2e_ms(ex.sent_ns, ex.end_ns)
    if scheduled_perf_ns is not None:
        record.e2e_from_schedule_ms = timing.ms_between(scheduled_perf_ns, ex.end_ns)
    try:
        record.input_tokens = read_answer(b"".join(chunk for _, chunk in ex.reads), body)
    except MalformedAnswer as exc:
        record.outcome, record.error_message = rec.PROTOCOL_ERROR, rec.truncate_message(
            f"{body.endpoint} answer: {exc}")
        return record
    record.outcome = rec.OK
    return record


def _unfinished_outcome(end: str) -> str:
    return {"timeout_ttft": rec.TIMEOUT_TTFT, "stall": rec.STALL,
            "timeout_total": rec.TIMEOUT_TOTAL, "protocol_error": rec.PROTOCOL_ERROR,
            }.get(end, rec.INCOMPLETE_STREAM)


def read_answer(raw: bytes, body: PooledBody) -> int | None:
    """Check a 200 answer's shape against what `body` asked; its input tokens (None when
    the server gives no usage). MalformedAnswer says what is wrong."""
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedAnswer(f"not JSON ({exc})") from None
    if not isinstance(answer, dict):
        raise MalformedAnswer("not a JSON object")
    if body.endpoint == "embeddings":
        _check_vectors(answer.get("data"), body)
    else:
        _check_results(answer.get("results"), body)
    return _input_tokens(answer.get("usage"))


def _check_vectors(data: object, body: PooledBody) -> None:
    if not isinstance(data, list) or len(data) != body.items:
        got = len(data) if isinstance(data, list) else type(data).__name__
        raise MalformedAnswer(f"`data` must hold {body.items} embeddings, got {got}")
    for item in data:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if body.encoding_format == "base64":
            if not isinstance(vector, str) or not vector:
                raise MalformedAnswer("an embedding is not a base64 string")
        elif (not isinstance(vector, list) or not vector
              or not all(isinstance(v, int | float) for v in vector)):
            raise MalformedAnswer("an embedding is not a list of numbers")
    _check_indexes([item.get("index") for item in data], body.items, "data")


def _check_results(results: object, body: PooledBody) -> None:
    wanted = body.expected_results()
    if not isinstance(results, list) or len(results) != wanted:
        got = len(results) if isinstance(results, list) else type(results).__name__
        raise MalformedAnswer(f"`results` must hold {wanted} results, got {got}")
    scores = []
    for item in results:
        score = item.get("relevance_score") if isinstance(item, dict) else None
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise MalformedAnswer("a result has no numeric relevance_score")
        scores.append(float(score))
    _check_indexes([item.get("index") for item in results], body.items, "results")
    if scores != sorted(scores, reverse=True):
        raise MalformedAnswer("`results` are not sorted by relevance_score, best first")


def _check_indexes(indexes: list[object], count: int, where: str) -> None:
    if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < count
           for i in indexes) or len(set(indexes)) != len(indexes):
        raise MalformedAnswer(f"`{where}` indexes must be distinct integers below {count}")


def _input_tokens(usage: object) -> int | None:
    """`prompt_tokens`, else `total_tokens` (nothing is generated, so they agree); a
    count of 0 or none is the server not counting (None)."""
    if not isinstance(usage, dict):
        return None
    for key in ("prompt_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
