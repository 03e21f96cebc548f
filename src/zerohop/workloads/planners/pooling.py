"""The pooling kinds' planner (their models: `pooling_specs`): one non-streaming request
carries a batch of texts (inputs to embed, or a query and the documents to rank against
it), and the answer is vectors or scores, not generated tokens.

Each text is a prompt of the single-request planner (`plans.Planner`), sized in tokens
by the same calibration and word counts as a chat prompt; a request gathers a batch of
them, its size drawn from the workload's distribution. A planned request is a
`PooledRequest`: a `PlannedRequest` (its first text as `prompt`) with the batch beside
it, which `client.api_request` turns into the embeddings or rerank body.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from zerohop.workloads.planners.request_plans import PlannedRequest, Planner, lengths_planner
from zerohop.workloads.schema.distributions import FixedDist
from zerohop.workloads.schema.pooling_specs import EMBEDDINGS, RERANK, RerankSpec

__all__ = ["PooledRequest", "PoolingPlanner", "make_pooling_planner"]


@dataclass(frozen=True, eq=False)
class PooledRequest(PlannedRequest):
    """One pooling request: `inputs` are the texts to embed or the documents to rank
    (`prompt` is the first of them, for what reads a plan's prompt), `query` the
    rerank's query; `target_input_tokens` the planned tokens the server reads: every
    input, or every document with the query beside it (a cross-encoder scores each
    pair)."""

    pooling: str = EMBEDDINGS  # EMBEDDINGS or RERANK: the endpoint
    inputs: tuple[str, ...] = ()
    query: str | None = None
    top_n: int | None = None
    encoding_format: str = "float"


class PoolingPlanner(Planner):
    """Plans pooling requests: each of the single-request planner's drafts becomes a
    batch of texts, each text sized like a prompt (a rerank's query by `query_tokens`)."""

    def _finish(self, draft: Any, *, scheduled_offset_s: float | None) -> PlannedRequest:
        spec = self.spec
        rerank = isinstance(spec, RerankSpec)
        count = (spec.documents if rerank else spec.inputs).sample_one(self._rng)
        drafts = [draft] + [self._sizer.draw(self._rng) for _ in range(count - 1)]
        planned = sum(d.input_tokens for d in drafts)
        if rerank:  # a cross-encoder reads the query beside each document
            drafts.append(replace(draft, input_tokens=spec.query_tokens.sample_one(self._rng)))
            planned += count * drafts[-1].input_tokens
        # the calibration sizes a chat request, whose template adds `b` tokens to its
        # text; a pooled text travels bare, so each is built `b` tokens longer
        overhead = max(0, round(getattr(self.calibration, "b", 0.0)))
        built = [super(PoolingPlanner, self)._finish(
            replace(d, input_tokens=d.input_tokens + overhead),
            scheduled_offset_s=scheduled_offset_s) for d in drafts]
        texts, query = (built[:-1], built[-1]) if rerank else (built, None)
        first = texts[0]
        base = {f.name: getattr(first, f.name) for f in fields(PlannedRequest)}
        base["target_input_tokens"] = planned
        base["prompt_clamped"] = any(bool(t.prompt_clamped) for t in built)
        base["max_tokens"] = 1  # nothing is generated; the plan's type needs a positive one
        return PooledRequest(
            **base, pooling=RERANK if rerank else EMBEDDINGS,
            inputs=tuple(str(t.prompt) for t in texts),
            query=None if query is None else str(query.prompt),
            top_n=spec.top_n if rerank else None,
            encoding_format="float" if rerank else spec.encoding_format)


def make_pooling_planner(spec: Any, setup: Any) -> PoolingPlanner:
    """The planner of an `embedding` or `rerank` workload (its kind's registry entry)."""
    texts = spec.document_tokens if isinstance(spec, RerankSpec) else spec.input_tokens
    inner = lengths_planner(spec, setup, input_tokens=texts,
                            output_tokens=FixedDist(type="fixed", value=1))
    return PoolingPlanner(spec=spec, sizer=inner._sizer, setup=setup)
