"""The planner of any workload kind, for the one place that plans every kind (the
load generator's workload binding).

Each kind's entry (`kind_registry`) names its planner: `plans.make_planner` plans the
single-request kinds; a conversation has a planner of sessions (`conversation`), an
agent workload a planner of tool-call loops (`agent`), a shared-prefix workload a
`Planner` with a pool of system prompts (`shared_prefix`).
"""

from __future__ import annotations

from typing import Any

from zerohop.workloads.kind_registry import workload_kind
from zerohop.workloads.planners.agent import AgentPlanner
from zerohop.workloads.planners.conversation import ConversationPlanner
from zerohop.workloads.planners.request_plans import Planner
from zerohop.workloads.planners.session_planner import SessionPlanner
from zerohop.workloads.planners.worker_load import WorkerSetup

__all__ = ["is_session_planner", "make_workload_planner"]


def make_workload_planner(spec: Any, setup: WorkerSetup
                          ) -> Planner | ConversationPlanner | AgentPlanner:
    """The planner for one worker of `spec`, whatever its kind (`setup`:
    `worker_load.worker_setup`, which checks the worker's position and seed)."""
    planner: Planner | ConversationPlanner | AgentPlanner = workload_kind(spec.kind).planner(
        spec, setup)
    return planner


def is_session_planner(planner: Any) -> bool:
    """Does `planner` hand out sessions (a conversation's turns, an agent's loops)
    rather than single requests? (Every planner of sessions is a `SessionPlanner`.)"""
    return isinstance(planner, SessionPlanner)
