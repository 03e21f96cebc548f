"""The requests a workload file offers over a duration: arrival times from the
workloads' own seeded open-loop schedules (`workloads.arrivals`, with the seed a live
run with the same `--seed` uses, so both offer the same arrivals), sizes drawn from
their distributions in numpy blocks (the same distributions, not the same draws).

Only open loads with fixed-size prompts can run on the virtual clock: a closed loop
needs a client's think time and a conversation its previous answers, which this
simulation does not model. Anything else is a `ValueError` naming the workload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zerohop.workloads.planners.request_plans import arrival_seed
from zerohop.workloads.schema.kinds import LongContextSpec, ShortQueryFloodSpec
from zerohop.workloads.schema.load_spec import GammaArrival, OpenLoad, PoissonArrival
from zerohop.workloads.timing.arrivals import schedule_for_load
from zerohop.workloads.yaml_io import load_workload_file

SUPPORTED = (ShortQueryFloodSpec, LongContextSpec)


@dataclass(frozen=True)
class OfferedLoad:
    """Every arrival of the run in time order (virtual ns from the start) and its sizes."""

    workloads: list[str]
    arrival_ns: np.ndarray  # int64, non-decreasing
    workload: np.ndarray  # int32 index into `workloads`
    prompt_tokens: np.ndarray  # int64
    max_tokens: np.ndarray  # int64
    ignore_eos: list[bool]  # per workload
    max_in_flight: list[int | None]  # per workload: the open load's cap (None: none)
    replica: np.ndarray | None = None  # int32: the replica each goes to (None: round robin)
    slos: dict[str, dict[str, float]] = field(default_factory=dict)  # workload -> its `slo:`

    def __len__(self) -> int:
        return int(self.arrival_ns.size)

    def rate_rps(self, duration_s: float) -> float:
        return len(self) / duration_s if duration_s > 0 else 0.0


def offered_load(path: Path, duration_s: float, *, seed: int, rate_scale: float = 1.0,
                 share: tuple[int, int] | None = None) -> OfferedLoad:
    """The arrivals of `path`'s workloads over [0, duration_s); `rate_scale` multiplies
    every rate (a sweep's load points from one file). `share=(k, n)`: only what k of n
    round-robin replicas receive (see `replica_share`), each arrival tagged with its
    replica."""
    specs = load_workload_file(path).workloads
    names: list[str] = []
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    ignore_eos: list[bool] = []
    caps: list[int | None] = []
    slos = {spec.name: spec.slo.objectives for spec in specs if spec.slo.objectives}
    for index, spec in enumerate(specs):  # index: the workload's own draws of sizes
        if not isinstance(spec, SUPPORTED):
            raise ValueError(
                f"workload {spec.name!r} is a {spec.kind}: the virtual clock runs "
                "short_query_flood and long_context workloads only"
            )
        if not isinstance(spec.load, OpenLoad):
            raise ValueError(
                f"workload {spec.name!r} has a closed load ({spec.load.kind}: users that "
                "wait for each answer, a client the virtual clock does not model): give "
                "it an open load, e.g. `load: {kind: open, rate_rps: 2}`"
            )
        load = spec.load
        if rate_scale != 1.0:
            load = load.model_copy(update={"rate_rps": load.rate_rps * rate_scale})
        wseed = spec.seed if spec.seed is not None else seed
        if share is None:
            offsets = schedule_for_load(load, arrival_seed(wseed, spec.name)).offsets(duration_s)
            replica = np.zeros(offsets.size, dtype=np.int32)
        else:
            offsets, replica = replica_share(load, share, (wseed, index), duration_s)
        rng = np.random.default_rng((wseed, index, 1))
        n = offsets.size
        if isinstance(spec, LongContextSpec):
            prompt, answer = spec.document_tokens, spec.summary_tokens
        else:
            prompt, answer = spec.input_tokens, spec.max_tokens
        names.append(spec.name)
        ignore_eos.append(spec.ignore_eos)
        caps.append(load.max_in_flight)
        parts.append((
            np.round(offsets * 1e9).astype(np.int64),
            np.full(n, index, dtype=np.int32),
            prompt.sample(rng, n).astype(np.int64),
            answer.sample(rng, n).astype(np.int64),
            replica,
        ))
    arrival = np.concatenate([p[0] for p in parts])
    order = np.argsort(arrival, kind="stable")
    return OfferedLoad(
        workloads=names,
        arrival_ns=arrival[order],
        workload=np.concatenate([p[1] for p in parts])[order],
        prompt_tokens=np.concatenate([p[2] for p in parts])[order],
        max_tokens=np.concatenate([p[3] for p in parts])[order],
        ignore_eos=ignore_eos,
        max_in_flight=caps,
        replica=None if share is None else np.concatenate([p[4] for p in parts])[order],
        slos=slos,
    )


def replica_share(load: OpenLoad, share: tuple[int, int], seed: tuple[int, int],
                  duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The arrivals k of n round-robin replicas receive, without making the other
    replicas' arrivals: every n-th point of a renewal process with gaps of CV c is a
    renewal process at 1/n of the rate whose gaps (sums of n) have CV c/√n, so each
    replica's stream is drawn as that, independently seeded. Exact for each replica
    of a one-workload file; the k streams' joint timing is not the interleaving's."""
    k, n = share
    arrival = load.arrival
    if isinstance(arrival, PoissonArrival | GammaArrival):
        cv = (arrival.cv if isinstance(arrival, GammaArrival) else 1.0) / math.sqrt(n)
        arrival = GammaArrival(type="gamma", cv=cv)
    thinned = load.model_copy(update={"rate_rps": load.rate_rps / n, "arrival": arrival})
    streams = [schedule_for_load(thinned, (*seed, 2, r)).offsets(duration_s) for r in range(k)]
    replicas = [np.full(s.size, r, dtype=np.int32) for r, s in enumerate(streams)]
    return np.concatenate(streams), np.concatenate(replicas)
