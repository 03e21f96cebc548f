"""Many tiny prompts with short outputs: per-request overhead, the gateway's worst case."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class ShortQueryFlood(LLMUser):
    workload_kind = "short_query_flood"
    weight = 4  # for a workload whose file sets no weight
