"""Agent loops: every model call offers tools; each tool call the model makes is
answered by a mocked tool after its latency, and the next call carries the whole
history, the calls and their results included, until the model answers in text or the
loop reaches its step cap. Runs only when a --workload file names an `agent` workload
(or the class is named: then workloads/agent.yaml)."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.sessions import SessionUser

install(events)


class Agent(SessionUser):
    workload_kind = "agent"
    weight = 1  # for a workload whose file sets no weight
