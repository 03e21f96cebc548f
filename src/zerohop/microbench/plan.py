"""How much each microbenchmark measures: the full, quick and smoke presets.

Sample counts are fixed (not "run for N seconds") so that two runs are comparable, and
every loop also has a wall-clock budget so that a slow machine ends early with fewer
samples (the `n` in each figure says how many) instead of overrunning a CI slot.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

HEADLINE_PCIE_SIZE = 256 * MiB  # the size of the *_256MiB_gbps metrics
SMALL_COPY_BYTES = 16


@dataclass(frozen=True)
class Plan:
    name: str
    # launch
    launch_warmup: int
    launch_roundtrip_samples: int
    async_batches: int
    async_batch_launches: int  # kept well under the launch queue's depth (gated stream)
    graph_nodes: int
    graph_replays: int
    priority_samples: int
    priority_long_kernel_ms: float
    priority_block_spin_us: float
    # ring
    ring_slots: int
    ring_descriptor_bytes: tuple[int, ...]
    ring_roundtrip_samples: int
    ring_throughput_windows: int
    ring_window_s: float
    ring_batch: int
    ring_kernel_timeout_s: float
    ring_compare_samples: int
    # pcie
    pcie_max_bytes: int
    pcie_samples_small: int
    pcie_samples_large: int
    pcie_target_bytes_per_sample: int
    pcie_max_copies_per_sample: int
    pcie_small_copy_samples: int
    # every timed loop stops early past this many seconds
    step_budget_s: float

    def pcie_sizes(self) -> list[int]:
        """16 B, then ×4 up to the maximum (16 B … 256 MiB quick, … 1 GiB full)."""
        sizes, size = [], SMALL_COPY_BYTES
        while size <= self.pcie_max_bytes:
            sizes.append(size)
            size *= 4
        return sizes


FULL = Plan(
    name="full",
    launch_warmup=500,
    launch_roundtrip_samples=20_000,
    async_batches=200,
    async_batch_launches=128,
    graph_nodes=64,
    graph_replays=200,
    priority_samples=100,
    priority_long_kernel_ms=20.0,
    priority_block_spin_us=20.0,
    ring_slots=1024,
    ring_descriptor_bytes=(16, 32, 64),
    ring_roundtrip_samples=20_000,
    ring_throughput_windows=10,
    ring_window_s=0.25,
    ring_batch=64,
    ring_kernel_timeout_s=30.0,
    ring_compare_samples=5_000,
    pcie_max_bytes=GiB,
    pcie_samples_small=30,
    pcie_samples_large=10,
    pcie_target_bytes_per_sample=256 * MiB,
    pcie_max_copies_per_sample=100,
    pcie_small_copy_samples=1_000,
    step_budget_s=30.0,
)

QUICK = Plan(
    name="quick",
    launch_warmup=200,
    launch_roundtrip_samples=5_000,
    async_batches=50,
    async_batch_launches=128,
    graph_nodes=64,
    graph_replays=50,
    priority_samples=40,
    priority_long_kernel_ms=20.0,
    priority_block_spin_us=20.0,
    ring_slots=1024,
    ring_descriptor_bytes=(16, 32, 64),
    ring_roundtrip_samples=5_000,
    ring_throughput_windows=5,
    ring_window_s=0.2,
    ring_batch=64,
    ring_kernel_timeout_s=15.0,
    ring_compare_samples=2_000,
    pcie_max_bytes=HEADLINE_PCIE_SIZE,
    pcie_samples_small=15,
    pcie_samples_large=8,
    pcie_target_bytes_per_sample=64 * MiB,
    pcie_max_copies_per_sample=100,
    pcie_small_copy_samples=300,
    step_budget_s=8.0,
)

# For tests and the pytest-benchmark entry points' smoke runs: seconds, not minutes.
SMOKE = Plan(
    name="smoke",
    launch_warmup=20,
    launch_roundtrip_samples=200,
    async_batches=5,
    async_batch_launches=64,
    graph_nodes=16,
    graph_replays=5,
    priority_samples=5,
    priority_long_kernel_ms=5.0,
    priority_block_spin_us=20.0,
    ring_slots=256,
    ring_descriptor_bytes=(16, 64),
    ring_roundtrip_samples=200,
    ring_throughput_windows=2,
    ring_window_s=0.05,
    ring_batch=32,
    ring_kernel_timeout_s=10.0,
    ring_compare_samples=100,
    pcie_max_bytes=16 * MiB,
    pcie_samples_small=3,
    pcie_samples_large=3,
    pcie_target_bytes_per_sample=4 * MiB,
    pcie_max_copies_per_sample=32,
    pcie_small_copy_samples=20,
    step_budget_s=3.0,
)

PLANS = {p.name: p for p in (FULL, QUICK, SMOKE)}


def get_plan(name: str) -> Plan:
    try:
        return PLANS[name]
    except KeyError:
        raise ValueError(f"unknown plan {name!r}; known: {sorted(PLANS)}") from None
