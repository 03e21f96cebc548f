"""The pooling kinds, `embedding` and `rerank`: their shipped files parse, their planner
draws batches of texts sized like prompts, the client sends them as embeddings or rerank
bodies, and what cannot apply (a TTFT objective, an API without the endpoints) is a
one-line refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from zerohop.client.api_request import to_request_spec
from zerohop.workloads.inputs import load_workloads
from zerohop.workloads.kind_planner import is_session_planner, make_workload_planner
from zerohop.workloads.kind_registry import workload_kind
from zerohop.workloads.planners.pooling import PooledRequest
from zerohop.workloads.planners.worker_load import worker_setup
from zerohop.workloads.schema.pooling_specs import (
    POOLING_APIS,
    EmbeddingSpec,
    RerankSpec,
    pooling_refusal,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def planner_of(spec: object, seed: int = 7) -> object:
    return make_workload_planner(spec, worker_setup(spec, seed=seed, worker_index=0,
                                                    worker_count=1))


def test_the_shipped_files_parse_and_are_registered_kinds() -> None:
    embedding, rerank = load_workloads([REPO / "workloads" / "embedding.yaml",
                                        REPO / "workloads" / "rerank.yaml"])
    assert isinstance(embedding, EmbeddingSpec) and isinstance(rerank, RerankSpec)
    assert workload_kind("embedding").user_class == "Embedding"
    assert workload_kind("rerank").default_file == "rerank.yaml"
    assert not workload_kind("embedding").runs_by_default  # an example, like agent
    assert embedding.slo.objectives == {"e2e_p99_ms": 2000.0}


def test_an_embedding_request_is_a_batch_of_prompt_sized_texts() -> None:
    spec = EmbeddingSpec.model_validate({
        "kind": "embedding", "name": "vectors", "inputs": {"type": "uniform", "min": 2, "max": 5},
        "input_tokens": {"type": "uniform", "min": 20, "max": 40}})
    planner = planner_of(spec)
    assert not is_session_planner(planner)
    planned = [planner.next_request() for _ in range(40)]  # type: ignore[attr-defined]
    assert all(isinstance(p, PooledRequest) and p.pooling == "embeddings" for p in planned)
    sizes = {len(p.inputs) for p in planned}
    assert sizes <= {2, 3, 4, 5} and len(sizes) > 1  # the batch size is drawn
    for p in planned:
        assert p.prompt == p.inputs[0] and p.query is None
        assert 20 * len(p.inputs) <= p.target_input_tokens <= 40 * len(p.inputs)
        assert len(set(p.inputs)) == len(p.inputs)  # each text its own words
    again = [planner_of(spec).next_request() for _ in range(1)]  # type: ignore[attr-defined]
    assert again[0].inputs == planned[0].inputs  # seeded
    sent = to_request_spec(planned[0], "openai-chat", "served-model")
    assert sent.pooled is not None
    assert (sent.pooled.endpoint, sent.pooled.model) == ("embeddings", "served-model")
    assert sent.pooled.texts == planned[0].inputs and sent.pooled.encoding_format == "float"


def test_a_rerank_request_is_a_query_and_documents_with_top_n() -> None:
    spec = RerankSpec.model_validate({
        "kind": "rerank", "name": "ranks", "documents": 6, "query_tokens": 10,
        "document_tokens": 50, "top_n": 2, "load": {"kind": "open", "rate_rps": 5}})
    planner = planner_of(spec)
    (first, *_rest) = list(planner.schedule(duration_s=2.0))  # type: ignore[attr-defined]
    assert isinstance(first, PooledRequest) and first.pooling == "rerank"
    assert first.scheduled_offset_s is not None
    assert len(first.inputs) == 6 and first.query and first.query not in first.inputs
    assert first.target_input_tokens == 6 * (50 + 10)  # the query is read beside each
    sent = to_request_spec(first, "openai-completions", "m").pooled
    assert sent is not None and (sent.query, sent.top_n) == (first.query, 2)


def test_a_ttft_objective_on_a_pooling_kind_is_a_one_line_error() -> None:
    with pytest.raises(ValidationError) as caught:
        EmbeddingSpec.model_validate({"kind": "embedding", "name": "v",
                                      "slo": {"ttft_p99_ms": 100, "e2e_p99_ms": 500}})
    (error,) = caught.value.errors()
    assert "ttft_p99_ms cannot judge a pooling kind" in error["msg"]
    assert "\n" not in error["msg"] and "e2e_p99_ms" in error["msg"]
    ok = RerankSpec.model_validate({"kind": "rerank", "name": "r", "slo": {"e2e_p99_ms": 500}})
    assert ok.slo.objectives == {"e2e_p99_ms": 500.0}
    with pytest.raises(ValidationError, match="response_format"):
        EmbeddingSpec.model_validate({"kind": "embedding", "name": "v",
                                      "response_format": {"type": "object"}})
    with pytest.raises(ValidationError, match="takes no images"):
        RerankSpec.model_validate({"kind": "rerank", "name": "r",
                                   "images": {"count": 1, "width": 64, "height": 64}})


def test_the_endpoints_are_an_openai_compatible_servers() -> None:
    spec = EmbeddingSpec.model_validate({"kind": "embedding", "name": "v"})
    for api in POOLING_APIS:
        assert pooling_refusal(spec, api) is None
    refusal = pooling_refusal(spec, "anthropic")
    assert refusal is not None and "/v1/embeddings" in refusal and "openai-chat" in refusal
    assert pooling_refusal(spec.model_copy(update={"api": "openai-chat"}), "anthropic") is None
