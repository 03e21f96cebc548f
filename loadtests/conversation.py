"""Multi-turn conversations: every turn sends the whole history, the target's own earlier
answers included, after a think time. Runs only when a --workload file names a
`conversation` workload (or the class is named: then workloads/conversation.yaml)."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.sessions import SessionUser

install(events)


class Conversation(SessionUser):
    workload_kind = "conversation"
    weight = 1  # for a workload whose file sets no weight
