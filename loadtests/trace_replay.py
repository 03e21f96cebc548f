"""Replay of a production trace's arrivals and lengths (Azure, Mooncake, ShareGPT)."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class TraceReplay(LLMUser):
    workload_kind = "trace_replay"
    weight = 1  # for a workload whose file sets no weight
    fixed_count = 1  # the dispatcher sends on the trace's clock; one user holds the slot
