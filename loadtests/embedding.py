"""Embeddings: batches of texts to /v1/embeddings, not streamed; records carry E2E, the
batch size (`items`) and the server's input tokens. Runs only when a --workload file
names an `embedding` workload (or the class is named: then workloads/embedding.yaml)."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class Embedding(LLMUser):
    workload_kind = "embedding"
    weight = 1  # for a workload whose file sets no weight
