"""The planner of any workload kind, for the one place that plans every kind (the
load generator's workload binding).

`plans.make_planner` plans the single-request kinds; a conversation has a planner of
sessions (`conversation`), an agent workload a planner of tool-call loops (`agent`), a
shared-prefix workload a `Planner` with a pool of system prompts (`shared_prefix`).
Those modules build on `plans`, so the choice between them is made here, above them all.
"""

from __future__ import annotations

from typing import Any

from zerohop.workloads.agent import AgentPlanner, make_agent_planner
from zerohop.workloads.conversation import ConversationPlanner, make_conversation_planner
from zerohop.workloads.kinds import AgentSpec, ConversationSpec, SharedPrefixSpec
from zerohop.workloads.plans import Planner, request_planner
from zerohop.workloads.shared_prefix import make_shared_prefix_planner
from zerohop.workloads.worker_load import WorkerSetup

__all__ = ["is_session_planner", "make_workload_planner"]


def make_workload_planner(spec: Any, setup: WorkerSetup
                          ) -> Planner | ConversationPlanner | AgentPlanner:
    """The planner for one worker of `spec`, whatever its kind (`setup`:
    `worker_load.worker_setup`, which checks the worker's position and seed)."""
    if isinstance(spec, ConversationSpec):
        return make_conversation_planner(spec, setup)
    if isinstance(spec, AgentSpec):
        return make_agent_planner(spec, setup)
    if isinstance(spec, SharedPrefixSpec):
        return make_shared_prefix_planner(spec, setup)
    return request_planner(spec, setup)


def is_session_planner(planner: Any) -> bool:
    """Does `planner` hand out sessions (a conversation's turns, an agent's loops)
    rather than single requests?"""
    return isinstance(planner, ConversationPlanner | AgentPlanner)
