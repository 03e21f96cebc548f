"""Which telemetry a model made rather than a measurement: one rule that the energy
figures, the report's charts and summary.json all read, so a modelled series is marked
the same everywhere.

A simulation's (the virtual clock's) series are all modelled. A run against the embedded
target reads its modelled GPU from the target's own /metrics (a `prom` source); NVML's
samples of a real GPU on the same machine are measured.
"""

from __future__ import annotations

from collections.abc import Mapping

GPU_PREFIXES = ("DCGM_", "gpu_", "pcie_")


def is_gpu_metric(metric: str) -> bool:
    return metric.startswith(GPU_PREFIXES)


def embedded_target(manifest: Mapping[str, object]) -> bool:
    """Whether the run's target was the embedded one."""
    target = manifest.get("target")
    return isinstance(target, dict) and target.get("kind") == "embedded"


def is_modelled_series(manifest: Mapping[str, object], metric: str, source: str) -> bool:
    """Whether the series `metric` from `source` in this run is a model's."""
    if "simulation" in manifest:
        return True
    return embedded_target(manifest) and is_gpu_metric(metric) and source.startswith("prom")
