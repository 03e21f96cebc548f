"""The workload kinds, one entry each: what a kind is made of, written in one place.

A kind's entry names its spec class (the YAML model, discriminated on `kind`), the
Locust user class that runs it, its default workload file, its planner, whether it runs
when no workload is named, and what must be readable before it starts. Everything that
used to keep a table of kinds derives from these entries: the YAML union
(`spec_union`, built when a file is parsed, so a kind registered later parses too), the
class names of `zerohop run --only` and `zerohop locustfile --only`, the default files
and run set (`LLMUser`, `zerohop run`'s -u), the planner (`planners`) and the input
checks (`inputs.check_inputs`).

The shipped kinds are registered at the bottom of this module. Their planners and input
checks are imported when called, so reading a workload file (`zerohop run`) loads no
planner; a new kind calls `register_kind` from a module of its own: a plugin
(`core/plugins.py`, `zerohop run --plugin`) that every process of the run imports, whose
user class `loadtests/plugin_kinds.py` makes from the entry (docs/architecture.md,
"Adding a workload kind").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from zerohop.workloads.schema.agent_spec import AgentSpec
from zerohop.workloads.schema.kinds import (
    ConversationSpec,
    LongContextSpec,
    LoraMixSpec,
    SharedPrefixSpec,
    ShortQueryFloodSpec,
    TraceReplaySpec,
)
from zerohop.workloads.schema.pooling_specs import EmbeddingSpec, RerankSpec
from zerohop.workloads.schema.workload_base import WorkloadBase

if TYPE_CHECKING:
    from zerohop.workloads.planners.worker_load import WorkerSetup

__all__ = ["WorkloadKind", "kind_of_class", "register_kind", "spec_union", "workload_kind",
           "workload_kinds"]

PlannerFactory = Callable[[Any, "WorkerSetup"], Any]
"""`(spec, setup) -> planner` (`setup`: `worker_load.worker_setup`): a `plans.Planner`
of single requests, or a planner of sessions (`conversation.ConversationPlanner`,
`agent.AgentPlanner`)."""


@dataclass(frozen=True)
class WorkloadKind:
    """One workload kind."""

    name: str  # the YAML's `kind:`
    spec: type[WorkloadBase]  # its model; its `kind` field is `Literal[name]`
    user_class: str  # the Locust user class that runs it (loadtests/<name>.py)
    default_file: str  # what its class runs when no --workload file names the kind
    planner: PlannerFactory
    runs_by_default: bool = False  # False: its default file is an example
    check_inputs: Callable[[Any], None] | None = None  # what the spec points at is readable
    sessions: bool = False  # its planner plans sessions: a user's step is a whole session

    def __post_init__(self) -> None:
        declared = self.spec.model_fields["kind"].annotation
        if getattr(declared, "__args__", None) != (self.name,):
            raise ValueError(f"{self.spec.__name__}.kind must be Literal[{self.name!r}] "
                             f"to be registered as kind {self.name!r}")


_KINDS: dict[str, WorkloadKind] = {}


def register_kind(entry: WorkloadKind) -> WorkloadKind:
    """Add a kind; registering the same entry again does nothing, another entry under a
    taken kind or class name is a ValueError."""
    for other in _KINDS.values():
        if other != entry and entry.name == other.name:
            raise ValueError(f"workload kind {entry.name!r} is already registered")
        if other != entry and entry.user_class == other.user_class:
            raise ValueError(f"user class {entry.user_class!r} already runs kind "
                             f"{other.name!r}")
    _KINDS[entry.name] = entry
    return entry


def workload_kind(name: str) -> WorkloadKind:
    """The entry of kind `name` (KeyError names the registered kinds)."""
    try:
        return _KINDS[name]
    except KeyError:
        raise KeyError(f"no workload kind {name!r} (have: {', '.join(_KINDS)})") from None


def workload_kinds() -> tuple[WorkloadKind, ...]:
    """Every registered kind, in registration order."""
    return tuple(_KINDS.values())


def kind_of_class(class_name: str) -> str | None:
    """The kind that the user class `class_name` runs (None: no registered kind's)."""
    return next((k.name for k in _KINDS.values() if k.user_class == class_name), None)


def spec_union() -> Any:
    """The type of one workload of any registered kind, discriminated on `kind`."""
    return _union_of(tuple(k.spec for k in _KINDS.values()))


@lru_cache(maxsize=8)
def _union_of(specs: tuple[type[WorkloadBase], ...]) -> Any:
    return Annotated[Union[specs], Field(discriminator="kind")]  # noqa: UP007


# --- the shipped kinds ----------------------------------------------------------------
# Their planners need numpy and the prompt builder: imported when a worker plans.
def _request_planner(spec: Any, setup: WorkerSetup) -> Any:
    from zerohop.workloads.planners.request_plans import request_planner

    return request_planner(spec, setup)


def _conversation_planner(spec: Any, setup: WorkerSetup) -> Any:
    from zerohop.workloads.planners.conversation import make_conversation_planner

    return make_conversation_planner(spec, setup)


def _agent_planner(spec: Any, setup: WorkerSetup) -> Any:
    from zerohop.workloads.planners.agent import make_agent_planner

    return make_agent_planner(spec, setup)


def _shared_prefix_planner(spec: Any, setup: WorkerSetup) -> Any:
    from zerohop.workloads.planners.shared_prefix import make_shared_prefix_planner

    return make_shared_prefix_planner(spec, setup)


def _pooling_planner(spec: Any, setup: WorkerSetup) -> Any:
    from zerohop.workloads.planners.pooling import make_pooling_planner

    return make_pooling_planner(spec, setup)


def _trace_readable(spec: Any) -> None:
    from zerohop.workloads.timing.traces import read_trace

    read_trace(spec.trace, spec.resolved_format)


def _conversations_readable(spec: Any) -> None:
    if spec.source.type != "synthetic":
        from zerohop.workloads.timing.conversation_sources import read_session_shapes

        read_session_shapes(spec.source)


for _entry in (
    WorkloadKind("short_query_flood", ShortQueryFloodSpec, "ShortQueryFlood",
                 "short_query_flood.yaml", _request_planner, runs_by_default=True),
    WorkloadKind("long_context", LongContextSpec, "LongContextSummarisation",
                 "long_context.yaml", _request_planner, runs_by_default=True),
    WorkloadKind("lora_mix", LoraMixSpec, "LoRAMix", "lora_mix.yaml", _request_planner,
                 runs_by_default=True),
    WorkloadKind("trace_replay", TraceReplaySpec, "TraceReplay",
                 "trace_replay_azure_conv.yaml", _request_planner, runs_by_default=True,
                 check_inputs=_trace_readable),
    WorkloadKind("conversation", ConversationSpec, "Conversation", "conversation.yaml",
                 _conversation_planner, check_inputs=_conversations_readable, sessions=True),
    WorkloadKind("shared_prefix", SharedPrefixSpec, "SharedPrefix", "shared_prefix.yaml",
                 _shared_prefix_planner),
    WorkloadKind("agent", AgentSpec, "Agent", "agent.yaml", _agent_planner, sessions=True),
    WorkloadKind("embedding", EmbeddingSpec, "Embedding", "embedding.yaml", _pooling_planner),
    WorkloadKind("rerank", RerankSpec, "Rerank", "rerank.yaml", _pooling_planner),
):
    register_kind(_entry)
