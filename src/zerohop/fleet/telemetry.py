"""The fleet's telemetry series on the virtual clock, one sample a tick, in the
canonical names a live run's telemetry uses, so the report's lanes show them.

The replicas' series are fleet totals or means (one lane per replica would not read at
a hundred replicas): queue, running batch, KV-cache use, batch occupancy, tokens/s and
the modelled GPU gauges. `gpu_sm_util_pct` is busy time (any step running), as NVML
reads it, and stays near 100 % under any steady load; `gpu_tensor_active_pct` is the
steps' FLOPs over what the GPUs can do in the tick, the figure that says how much more
they could take. The layer's `layer_cpu_pct` is the CPU work finished in the tick over
what its cores could do in it; beside it its memory, queue and whether it is up.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from zerohop.core.layout import TELEMETRY_FILE
from zerohop.fleet.clock import FleetClock
from zerohop.fleet.layer_model import LayerState
from zerohop.telemetry.samples import labels_json
from zerohop.telemetry.store import COLUMNS, telemetry_schema

SOURCE = "virtual-clock"
LAYER_SOURCE = "virtual-clock:layer"
FLEET = labels_json({"replicas": "all"})


class FleetTelemetry:
    """Collects one row per (tick, metric); `write` makes telemetry.parquet."""

    def __init__(self, start_wall_s: float, tick_ns: int, *, fleet_scale: float = 1.0,
                 load_end_ns: int = 0) -> None:
        self.start_wall_s = start_wall_s
        self.fleet_scale = fleet_scale  # totals of k simulated replicas -> the fleet's
        self.tick_ns = tick_ns
        self.rows: list[tuple[float, str, str, str, float, str | None]] = []
        self._last_tokens = 0
        self._last_cpu_done = 0
        self._last_compute_s = 0.0
        self.peak: dict[str, float] = {}
        self._carried_compute_s = 0.0
        self.load_end_ns = load_end_ns
        self.queue_at_load_end = 0.0  # the fleet's queue at the last tick of the load

    def tick(self, now_ns: int, clock: FleetClock) -> None:
        engines, layer = clock.engines, clock.layer
        ts = self.start_wall_s + now_ns / 1e9
        n = len(engines)
        waiting = sum(len(e.waiting) for e in engines)
        running = sum(len(e.running) for e in engines)
        gauges = [e.activity.sample(now_ns) for e in engines]
        tokens = sum(e.stats.generation_tokens_total for e in engines)
        values = {
            "queue_depth": waiting * self.fleet_scale,
            "running_requests": running * self.fleet_scale,
            "kv_cache_usage_frac": sum(e.kv_usage() for e in engines) / n,
            "batch_occupancy_frac": sum(
                len(e.running) / e.engine_config.max_num_seqs for e in engines) / n,
            "generation_tokens_per_s": (tokens - self._last_tokens) / (self.tick_ns / 1e9)
            * self.fleet_scale,
            "gpu_sm_util_pct": sum(g["util_pct"] for g in gauges) / n,
            "gpu_tensor_active_pct": self._tensor_active_pct(clock.compute_s, n),
            "gpu_power_w": sum(g["power_w"] for g in gauges) / n,
            "gpu_temp_c": sum(g["temp_c"] for g in gauges) / n,
        }
        self._last_tokens = tokens
        if now_ns <= self.load_end_ns:
            self.queue_at_load_end = values["queue_depth"]
        for metric, value in values.items():
            self._add(ts, SOURCE, metric, FLEET, value)
        if layer is not None:
            self._layer(ts, layer)

    def _tensor_active_pct(self, compute_s: float, replicas: int) -> float:
        """The share of the tick the GPUs computed. A step's FLOPs are counted when it
        is scheduled, so a step that runs on past the tick's end would read over 100 %:
        what exceeds the tick's capacity is carried into the next tick instead (the
        total is kept, no tick reads more than a GPU can do)."""
        capacity_s = self.tick_ns / 1e9 * replicas
        work_s = self._carried_compute_s + compute_s - self._last_compute_s
        self._last_compute_s = compute_s
        done_s = min(work_s, capacity_s)
        self._carried_compute_s = work_s - done_s
        return 100.0 * done_s / capacity_s

    def _layer(self, ts: float, layer: LayerState) -> None:
        done = layer.cpu_done_count - self._last_cpu_done
        self._last_cpu_done = layer.cpu_done_count
        capacity_ns = layer.spec.cores * self.tick_ns
        cpu_pct = 100.0 * min(1.0, done * layer.cpu_ns / capacity_ns) if capacity_ns else 0.0
        up = layer.died_ns is None
        values = {
            "layer_up": 1.0 if up else 0.0,
            "layer_cpu_pct": cpu_pct if up else math.nan,
            "layer_memory_bytes": layer.memory_bytes,
            "layer_memory_limit_bytes": layer.limit_bytes,
            "layer_queued_requests": float(len(layer.cpu_queue) + len(layer.pending)),
            "layer_requests": float(len(layer.held)),
        }
        for metric, value in values.items():
            self._add(ts, LAYER_SOURCE, metric, "{}", value)

    def _add(self, ts: float, source: str, metric: str, labels: str, value: float) -> None:
        self.rows.append((ts, source, metric, labels, value, None))
        if not math.isnan(value) and value > self.peak.get(metric, -math.inf):
            self.peak[metric] = value

    def write(self, run_dir: Path) -> Path:
        columns = {name: [row[i] for row in self.rows] for i, name in enumerate(COLUMNS)}
        table = pa.table(columns, schema=telemetry_schema())
        out = run_dir / TELEMETRY_FILE
        pq.write_table(table, out, compression="zstd")
        return out
