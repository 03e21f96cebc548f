"""The layer in front of the replicas, as a finite machine: the part of a proxy or
orchestrator that runs out before the GPUs do.

Every request the layer holds (queued for CPU, waiting for a worker or a connection, or
streaming) holds `request_kib` of its memory on top of `base_mib`. A request first needs
`cpu_ms` of CPU on one of `cores` cores (first come, first served), then one of
`workers` upstream slots and one of `connections` to a replica (round robin over those
with a free connection), held until its stream ends. When an arrival would take the
memory past `memory_mib` the layer dies: every request it holds fails and it refuses
every later one. `--layer` takes the fields as `key=value,...`.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_KIB = 1024
_MIB = 1024 * 1024


class LayerSpec(BaseModel):
    """What the layer has. The defaults (`--layer on`) are the promotion burst's layer
    (workloads/promotion_burst.yaml): 16 cores at 0.5 ms take 32k req/s, and 14 GiB
    above its base at 24 KiB a request hold about 600k requests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_ms: float = Field(default=0.5, ge=0, description="CPU per request, ms (one core).")
    cores: int = Field(default=16, gt=0, description="Cores the layer's CPU work runs on.")
    workers: int | None = Field(
        default=None, gt=0, description="Requests the layer streams at once (None: no cap)."
    )
    connections: int | None = Field(
        default=None, gt=0, description="Connections to each replica (None: no cap)."
    )
    memory_mib: float = Field(default=16384, gt=0, description="Memory limit, MiB.")
    base_mib: float = Field(default=2048, ge=0, description="Memory used with no request, MiB.")
    request_kib: float = Field(
        default=24, ge=0, description="Memory each request holds while in the layer, KiB."
    )

    @property
    def capacity_rps(self) -> float:
        """Requests per second the CPU can take (inf with no CPU cost)."""
        return float("inf") if self.cpu_ms == 0 else self.cores * 1000.0 / self.cpu_ms


def parse_layer_spec(text: str) -> LayerSpec:
    """`cpu_ms=0.5,cores=16,...` (or `on` for the defaults); ValueError in one line."""
    fields: dict[str, Any] = {}
    if text.strip() not in ("", "on"):
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"--layer: expected key=value, got {part.strip()!r}")
            fields[key.strip()] = value.strip()
    try:
        return LayerSpec.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(spec)"
        known = ", ".join(LayerSpec.model_fields)
        raise ValueError(f"--layer: {where}: {err['msg']} (fields: {known})") from None


class LayerState:
    """The layer's queues and counters on the virtual clock. The clock calls `arrive`,
    `cpu_done` and `release`; `start` (given by the clock) sends a request upstream."""

    def __init__(self, spec: LayerSpec, replicas: int, start: Callable[[Any, int, int], None]
                 ) -> None:
        self.spec = spec
        self.replicas = replicas
        self._start = start
        self.cpu_ns = int(spec.cpu_ms * 1e6)
        self._core_free = [0] * spec.cores  # a heap of the times each core frees up
        self.cpu_queue: deque[tuple[int, Any]] = deque()  # (cpu done ns, request), in order
        self.pending: deque[Any] = deque()  # CPU done, waiting for a worker or connection
        self.held: dict[int, Any] = {}  # every request in the layer, by index
        self.upstream = 0
        self.conn_busy = [0] * replicas
        self._next = 0
        self.limit_bytes = spec.memory_mib * _MIB
        self.base_bytes = spec.base_mib * _MIB
        self.request_bytes = spec.request_kib * _KIB
        self.died_ns: int | None = None
        self.cpu_done_count = 0  # requests whose CPU work ended (for the CPU gauge)

    @property
    def memory_bytes(self) -> float:
        if self.died_ns is not None:
            return 0.0
        return self.base_bytes + len(self.held) * self.request_bytes

    def arrive(self, req: Any, now_ns: int) -> bool:
        """Take one arrival; False when the layer is down or dies of it (the caller
        fails the request; `died_ns` tells which)."""
        if self.died_ns is not None:
            return False
        if self.base_bytes + (len(self.held) + 1) * self.request_bytes > self.limit_bytes:
            self.died_ns = now_ns
            return False
        self.held[req.index] = req
        core = heapq.heappop(self._core_free)
        done = max(core, now_ns) + self.cpu_ns
        heapq.heappush(self._core_free, done)
        self.cpu_queue.append((done, req))
        return True

    def cpu_done(self, now_ns: int) -> None:
        """The CPU work of the queue's head ended: send it upstream or let it wait."""
        _, req = self.cpu_queue.popleft()
        self.cpu_done_count += 1
        self.pending.append(req)
        self._drain(now_ns)

    def release(self, req: Any, now_ns: int) -> None:
        """A request left the layer (its stream ended or failed upstream)."""
        if self.held.pop(req.index, None) is None:
            return
        if req.replica >= 0:
            self.upstream -= 1
            self.conn_busy[req.replica] -= 1
        self._drain(now_ns)

    def take_all(self) -> list[Any]:
        """The layer died: every request it held, now lost; its queues are emptied."""
        lost = list(self.held.values())
        self.held.clear()
        self.cpu_queue.clear()
        self.pending.clear()
        self.upstream = 0
        self.conn_busy = [0] * self.replicas
        return lost

    def _drain(self, now_ns: int) -> None:
        workers = self.spec.workers
        while self.pending and (workers is None or self.upstream < workers):
            replica = self._free_replica()
            if replica < 0:
                return
            req = self.pending.popleft()
            self.upstream += 1
            self.conn_busy[replica] += 1
            self._start(req, replica, now_ns)

    def _free_replica(self) -> int:
        """The next replica in round-robin order with a free connection (-1: none)."""
        limit = self.spec.connections
        for _ in range(self.replicas):
            replica = self._next
            self._next = (self._next + 1) % self.replicas
            if limit is None or self.conn_busy[replica] < limit:
                return replica
        return -1
