"""Rerank: a query and its documents to /v1/rerank, not streamed; records carry E2E, the
documents ranked (`items`) and the server's input tokens. Runs only when a --workload
file names a `rerank` workload (or the class is named: then workloads/rerank.yaml)."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class Rerank(LLMUser):
    workload_kind = "rerank"
    weight = 1  # for a workload whose file sets no weight
