"""A pool of system prompts shared by many requests, each with a question of its own:
the prefix cache's hit rate and what it buys (`prefix_mode: unique` is the cache-cold
control). Runs only when a --workload file names a `shared_prefix` workload (or the
class is named: then workloads/shared_prefix.yaml)."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class SharedPrefix(LLMUser):
    workload_kind = "shared_prefix"
    weight = 1  # for a workload whose file sets no weight
