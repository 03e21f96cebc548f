"""Long documents (8k–128k tokens) summarised in a few hundred: prefill cost, KV pressure."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class LongContextSummarisation(LLMUser):
    workload_kind = "long_context"
    weight = 1  # for a workload whose file sets no weight
