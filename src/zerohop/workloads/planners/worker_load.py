"""One worker's share of a workload's load, for every kind of planner.

A workload runs on N workers; each planner plans for worker i of them. What follows
from that alone (the users it runs, its share of the in-flight cap, the closed loop's
think time) and how a planner's `make_*` resolves its API and prompt calibration are
the same for single requests, shared prefixes and conversations, so they live here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from zerohop.core.apis import DEFAULT_API, ApiName
from zerohop.workloads.content.prompts import PromptBuilder, TokenCalibration, default_calibration
from zerohop.workloads.schema.load_spec import ClosedLoad
from zerohop.workloads.timing.arrivals import check_worker, split_count

__all__ = ["WorkerLoadShare", "WorkerSetup", "worker_setup"]


@dataclass(frozen=True)
class WorkerSetup:
    """What every planner's `make_*` resolves before it builds a planner: the seed
    (the spec's own, else the run's), which worker of how many, the API, the prompt
    builder and the calibration for that API."""

    seed: int
    worker_index: int
    worker_count: int
    api: ApiName
    builder: PromptBuilder
    calibration: TokenCalibration


def worker_setup(
    spec: Any,
    *,
    seed: int,
    worker_index: int,
    worker_count: int,
    calibration: TokenCalibration | None = None,
    default_api: ApiName = DEFAULT_API,
    builder: PromptBuilder | None = None,
) -> WorkerSetup:
    """The setup of worker `worker_index` of `worker_count` for `spec`: `seed` is the
    run's (the spec's own `seed` wins when set); `calibration` maps target tokens to
    generated words for the API in use (default: measured against the embedded
    target's documented tokenizer)."""
    check_worker(worker_index, worker_count)
    api: ApiName = spec.api or default_api
    builder = builder or PromptBuilder()
    return WorkerSetup(
        seed=spec.seed if spec.seed is not None else seed,
        worker_index=worker_index,
        worker_count=worker_count,
        api=api,
        builder=builder,
        calibration=calibration or default_calibration(api, builder),
    )


class WorkerLoadShare:
    """Mixin: what a planner of `spec` for worker `worker_index` of `worker_count`
    runs of the load; `_rng` draws exponential think times."""

    spec: Any
    worker_index: int
    worker_count: int
    _rng: np.random.Generator

    @property
    def workload(self) -> str:
        return str(self.spec.name)

    @property
    def users(self) -> int:
        """Closed loop: this worker's share of the workload's users, each running
        requests or sessions one after another (0 for open loads)."""
        load = self.spec.load
        if not isinstance(load, ClosedLoad):
            return 0
        return split_count(load.users, self.worker_index, self.worker_count)

    def in_flight_cap(self) -> int | None:
        """This worker's share of the `max_in_flight` cap on live requests or sessions
        (None: no cap); the workers' shares add up to the cap, each at least 1."""
        cap = getattr(self.spec.load, "max_in_flight", None)
        if cap is None:
            return None
        return max(1, split_count(cap, self.worker_index, self.worker_count))

    def think_time_s(self) -> float:
        """Closed loop: a user's pause after a response (or session) ends before the next."""
        load = self.spec.load
        if not isinstance(load, ClosedLoad) or load.think_time_s == 0:
            return 0.0
        if load.think_time == "exponential":
            return float(self._rng.exponential(load.think_time_s))
        return float(load.think_time_s)
