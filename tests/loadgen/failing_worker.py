"""A locustfile whose Locust worker 1 breaks, shared by the tests that check a failed
worker fails the run loudly (plain Locust and `zerohop run --workers`)."""

from __future__ import annotations

_LOCUSTFILE = """
import os

from locust import events
from locust.runners import WorkerRunner

from zerohop.loadgen import hooks
from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class ShortQueryFlood(LLMUser):
    workload_kind = "short_query_flood"
    default_workload_file = "short_query_flood.yaml"


_prepare = hooks._prepare_bindings


def _breaking_in_worker_1(environment):
    runner = environment.runner
    if isinstance(runner, WorkerRunner) and runner.worker_index == 1:
        if "{how}" == "crash":
            os._exit(3)  # dies without a word, as a killed process does
        raise RuntimeError("injected set-up failure")
    _prepare(environment)


hooks._prepare_bindings = _breaking_in_worker_1
"""


def failing_worker_locustfile(how: str) -> str:
    """The locustfile text; worker 1 either `raise`s at set-up or `crash`es silently."""
    if how not in ("raise", "crash"):
        raise ValueError(f"how must be 'raise' or 'crash', not {how!r}")
    return _LOCUSTFILE.replace("{how}", how)
