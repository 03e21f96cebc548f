"""The sim's pooling endpoints: `/v1/embeddings`, `/v1/rerank` and `/v1/score`.

A pooling model reads its input and answers with vectors or scores: it prefills and
never decodes. Each text of a request (each input; each query-document pair of a rerank
or score) is one sequence of the engine, of its tokens and one sampled position — the
prefill step that a generation's first token would end — so the texts are batched with
each other and with the generation the engine is running, and priced by the same step
cost. The answer goes out when the last of them is through, as one JSON body.

Vectors are `EMBEDDING_DIMENSIONS` floats drawn from a hash of the text (the same text,
the same unit vector); a document's relevance score is a hash of the query and the
document in [0, 1). The usage counts each text's tokens (`tokens.count_text_tokens`).
These requests are not in the ground truth (`/zerohop/ground_truth` holds generations).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import time
from collections.abc import Mapping
from typing import Any

from zerohop.sim.answers.api_shapes import error_body
from zerohop.sim.answers.tokens import count_text_tokens
from zerohop.sim.engine.engine import Engine
from zerohop.sim.sequence import EngineError, PreparedWrite, Sequence
from zerohop.sim.serving.http_server import HttpConnection, HttpRequest

__all__ = ["EMBEDDING_DIMENSIONS", "POOLING_PATHS", "PoolingError", "embedding_vector",
           "read_pooling_body", "relevance_score", "serve_pooling"]

EMBEDDINGS_PATH, RERANK_PATH, SCORE_PATH = "/v1/embeddings", "/v1/rerank", "/v1/score"
POOLING_PATHS = (EMBEDDINGS_PATH, RERANK_PATH, SCORE_PATH)
EMBEDDING_DIMENSIONS = 8


class PoolingError(ValueError):
    """A request the endpoint cannot read (HTTP 400, or `status`)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def embedding_vector(text: str) -> list[float]:
    """The text's unit vector of EMBEDDING_DIMENSIONS floats (a hash of the text)."""
    digest = hashlib.blake2b(text.encode(), digest_size=2 * EMBEDDING_DIMENSIONS).digest()
    raw = [v / 32768.0 - 1.0 for v in struct.unpack(f"<{EMBEDDING_DIMENSIONS}H", digest)]
    norm = sum(v * v for v in raw) ** 0.5 or 1.0
    return [round(v / norm, 6) for v in raw]


def relevance_score(query: str, document: str) -> float:
    """The document's score against the query, in [0, 1) (a hash of both)."""
    digest = hashlib.blake2b(f"{query}\x00{document}".encode(), digest_size=4).digest()
    return round(int.from_bytes(digest, "little") / 2**32, 6)


def read_pooling_body(path: str, body: dict[str, Any]) -> tuple[list[str], str | None]:
    """(texts, query) of a request: the inputs to embed, the documents to rank (with
    the query), or a score's `text_2` (with its one `text_1` as the query)."""
    if path == EMBEDDINGS_PATH:
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        return _texts(texts, "input"), None
    if path == RERANK_PATH:
        query = body.get("query")
        if not isinstance(query, str):
            raise PoolingError("`query` must be a string")
        return _texts(body.get("documents"), "documents"), query
    first = body.get("text_1")
    first = first[0] if isinstance(first, list) and len(first) == 1 else first
    if not isinstance(first, str):
        raise PoolingError("`text_1` must be a string (or a list of one)")
    second = body.get("text_2")
    return _texts([second] if isinstance(second, str) else second, "text_2"), first


def _texts(value: object, name: str) -> list[str]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(t, str) and t for t in value)):
        raise PoolingError(f"`{name}` must be a non-empty list of non-empty strings")
    return list(value)


def serve_pooling(conn: HttpConnection, request: HttpRequest, *,
                  routes: Mapping[str, tuple[Engine, str | None]], request_id: str,
                  extra_headers: list[tuple[bytes, bytes]]) -> None:
    """Answer one pooling request; `routes`: the sim's model name -> (engine, adapter)
    (a pooling request runs on the model's engine, without an adapter)."""
    try:
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PoolingError(f"request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise PoolingError("request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise PoolingError("`model` is required")
        if model not in routes:
            raise PoolingError(f"The model `{model}` does not exist.", 404)
        engine = routes[model][0]
        texts, query = read_pooling_body(request.path, body)
        top_n = body.get("top_n")
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int)
                                  or top_n < 0):
            raise PoolingError("`top_n` must be a non-negative integer")
        top_n = top_n or None  # vLLM's default, 0: every document
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            raise PoolingError("`encoding_format` must be float or base64")
        extra = 0 if query is None else count_text_tokens(query)
        tokens = [max(1, count_text_tokens(t) + extra) for t in texts]
        for count in tokens:
            engine.check_request(count, 1, None)
    except PoolingError as err:
        conn.send(err.status, error_body("chat", err.status, str(err)),
                  extra_headers=extra_headers)
        return
    except EngineError as err:
        conn.send(err.status, error_body("chat", err.status, err.message, err.error_type),
                  extra_headers=extra_headers)
        return
    answer = _PooledAnswer(conn, request.path, model, texts, query, top_n, encoding,
                           extra_headers)
    answer.start(engine, request_id, tokens, request.arrival_ns)


class _PooledAnswer:
    """One pooling request's sequences (its sink): the body goes out when the last of
    them has been through its prefill."""

    def __init__(self, conn: HttpConnection, path: str, model: str, texts: list[str],
                 query: str | None, top_n: int | None, encoding: str,
                 extra_headers: list[tuple[bytes, bytes]]) -> None:
        self.conn, self.path, self.model = conn, path, model
        self.texts, self.query, self.top_n, self.encoding = texts, query, top_n, encoding
        self.extra_headers = extra_headers
        self.sequences: list[Sequence] = []
        self.left = 0
        self.ended = False
        self.engine: Engine | None = None

    def start(self, engine: Engine, request_id: str, tokens: list[int], arrival_ns: int
              ) -> None:
        self.engine = engine
        self.sequences = [Sequence(request_id=f"{request_id}-{i}", prompt_tokens=count,
                                   target_output=1, max_tokens=1, sink=self,
                                   arrival_ns=arrival_ns)
                          for i, count in enumerate(tokens)]
        self.left = len(self.sequences)
        self.conn.on_lost = self._client_gone
        for seq in self.sequences:
            engine.submit(seq)

    def prepare_token(self, seq: Sequence, finished: bool) -> PreparedWrite | None:
        return None

    def on_token(self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
                 ) -> None:
        if not finished or self.ended:
            return
        self.left -= 1
        if self.left == 0:
            self.ended = True
            prompt_tokens = sum(s.prompt_tokens for s in self.sequences)
            self.conn.send(200, self.body(prompt_tokens), extra_headers=self.extra_headers)

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        if self.ended:
            return
        self._end_others(seq)
        self.conn.send(error.status, error_body("chat", error.status, error.message,
                                                error.error_type),
                       extra_headers=self.extra_headers)

    def _client_gone(self) -> None:
        if not self.ended:
            self._end_others(None)

    def _end_others(self, failed: Sequence | None) -> None:
        self.ended = True
        for seq in self.sequences:
            if seq is not failed and not seq.done and self.engine is not None:
                self.engine.abort(seq)

    def body(self, prompt_tokens: int) -> bytes:
        """The answer in the endpoint's shape, with its usage."""
        usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens,
                 "completion_tokens": 0}
        head = {"id": f"pool-{time.monotonic_ns():x}", "created": int(time.time()),
                "model": self.model}
        if self.path == EMBEDDINGS_PATH:
            data = [{"index": i, "object": "embedding", "embedding": self._vector(text)}
                    for i, text in enumerate(self.texts)]
            return json.dumps({**head, "object": "list", "data": data, "usage": usage}
                              ).encode()
        query = self.query or ""
        scores = [relevance_score(query, text) for text in self.texts]
        if self.path == SCORE_PATH:
            scored = [{"index": i, "object": "score", "score": s} for i, s in enumerate(scores)]
            return json.dumps({**head, "object": "list", "data": scored, "usage": usage}
                              ).encode()
        ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        results = [{"index": i, "document": {"text": self.texts[i]},
                    "relevance_score": scores[i]} for i in ranked[: self.top_n]]
        return json.dumps({**head, "results": results, "usage": usage}).encode()

    def _vector(self, text: str) -> list[float] | str:
        vector = embedding_vector(text)
        if self.encoding == "base64":
            return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        return vector
