"""The pooling kinds' models, `embedding` and `rerank` (their planner: `pooling`):
requests answered by vectors or scores, not by generated tokens, so the generation
fields (`max_tokens`, `response_format`) do not apply. Kept apart from the planner so
that reading a workload file imports no planner (`kind_registry`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from zerohop.core.apis import API_NAMES
from zerohop.core.slo import parse_slo_mapping
from zerohop.workloads.schema.distributions import Distribution, uniform_by_default
from zerohop.workloads.schema.load_spec import ClosedOrOpenLoad, closed_by_default
from zerohop.workloads.schema.workload_base import TextPromptWorkload

__all__ = ["EMBEDDINGS", "POOLING_APIS", "RERANK", "EmbeddingSpec", "RerankSpec",
           "pooling_refusal"]

_CLOSED_OR_OPEN = "closed (users, think time) or open (rate, arrivals, cap, shape)."
EMBEDDINGS = "embeddings"  # the endpoints a pooling request goes to
RERANK = "rerank"
# the latencies a pooling request has, so its SLOs may use them: send to end
POOLING_SLO_METRICS = frozenset({"e2e_ms", "e2e_from_schedule_ms"})
# the APIs of an OpenAI-compatible server, which serves /v1/embeddings and /v1/rerank
# beside them; an Anthropic Messages server has neither endpoint
POOLING_APIS = tuple(name for name in API_NAMES if name.startswith("openai-"))


class _PoolingWorkload(TextPromptWorkload):
    """What the pooling kinds share: they are answered by vectors or scores, so the
    generation fields (`max_tokens`, `ignore_eos`, `response_format`) and the chat
    fields (`images`) do not apply."""

    @model_validator(mode="after")
    def _nothing_generated(self) -> _PoolingWorkload:
        if self.response_format is not None:
            raise ValueError("a pooling kind takes no response_format (nothing is generated)")
        if self.images is not None:
            raise ValueError("a pooling kind takes no images (its inputs are texts)")
        streamed = sorted(t.key for t in parse_slo_mapping(self.slo.objectives)
                          if t.column not in POOLING_SLO_METRICS)
        if streamed:
            raise ValueError(
                f"slo: {', '.join(streamed)} cannot judge a pooling kind: its answer is one "
                f"body, not a stream, so it has no TTFT, ITL or TPOT (use e2e, e.g. "
                f"e2e_p99_ms)")
        return self


class EmbeddingSpec(_PoolingWorkload):
    """Batches of texts to embed (`POST /v1/embeddings`, OpenAI's shape)."""

    kind: Literal["embedding"] = Field(description="Workload kind.")
    inputs: Distribution = uniform_by_default(
        1, 16, "Inputs per request: the batch size (int or distribution).")
    input_tokens: Distribution = uniform_by_default(
        32, 256, "Length of each input in tokens (int or distribution).")
    encoding_format: Literal["float", "base64"] = Field(
        default="float", description="How the server returns each vector.")
    load: ClosedOrOpenLoad = closed_by_default(4, _CLOSED_OR_OPEN)


class RerankSpec(_PoolingWorkload):
    """A query and documents to rank against it (`POST /v1/rerank`, the Jina/Cohere
    shape vLLM serves)."""

    kind: Literal["rerank"] = Field(description="Workload kind.")
    documents: Distribution = uniform_by_default(
        4, 32, "Documents per query: the batch size (int or distribution).")
    query_tokens: Distribution = uniform_by_default(
        8, 32, "Length of the query in tokens (int or distribution).")
    document_tokens: Distribution = uniform_by_default(
        64, 256, "Length of each document in tokens (int or distribution).")
    top_n: int | None = Field(
        default=None, gt=0, description="Results to return, best first (None: all).")
    load: ClosedOrOpenLoad = closed_by_default(4, _CLOSED_OR_OPEN)


def pooling_refusal(spec: Any, run_api: str) -> str | None:
    """Why `spec` cannot run on the API it would use (its own `api`, else the run's):
    a pooling kind's endpoints are an OpenAI-compatible server's. None when it can."""
    api = spec.api or run_api
    if spec.kind in ("embedding", "rerank") and api not in POOLING_APIS:
        return (f"workload '{spec.name}' ({spec.kind}) posts to an OpenAI-compatible "
                f"server's /v1/{'embeddings' if spec.kind == 'embedding' else 'rerank'}, "
                f"which {api} is not: use --api {' or '.join(POOLING_APIS)}")
    return None
