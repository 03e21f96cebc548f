"""A paged KV cache as the scheduler sees it: a pool of fixed-size blocks.

Only counts matter for timing (which request holds how many blocks, how many are
free); no contents are stored. Capacity follows vLLM's rule: GPU memory × utilisation,
minus weights and a per-GPU reserve for activations, divided by the bytes of one block.
With prefix caching (`prefix_cache.PrefixCache`) some free blocks still hold a cached
prefix: they count as free, and an allocation tells the cache (`on_take`) so that it
evicts the ones it overwrote.
"""

from __future__ import annotations

from collections.abc import Callable

from zerohop.sim.cost_model.profiles import GIB, MIB, GpuProfile, ModelProfile


def kv_capacity_blocks(
    gpu: GpuProfile,
    model: ModelProfile,
    *,
    tp: int,
    block_size: int,
    gpu_memory_utilization: float,
    non_kv_reserve_gib: float,
) -> int:
    """Blocks that fit in the memory left after weights (all `tp` GPUs together)."""
    usable = tp * (gpu.memory_mib * MIB * gpu_memory_utilization - non_kv_reserve_gib * GIB)
    free = usable - model.weight_bytes
    block_bytes = block_size * model.kv_bytes_per_token
    return max(0, int(free // block_bytes))


class BlockPool:
    """Free-block accounting with the allocation rule of a paged cache."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks <= 0:
            raise ValueError("the KV cache has no blocks: the model does not fit the GPU")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_blocks = num_blocks
        self.on_take: Callable[[], None] | None = None  # after blocks were taken

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def used_blocks(self) -> int:
        return self.num_blocks - self.free_blocks

    def usage(self) -> float:
        return self.used_blocks / self.num_blocks

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def try_grow(self, held: int, tokens: int) -> int | None:
        """Blocks to hold `tokens` given `held` already; None when they don't fit.
        On success the extra blocks are taken from the pool."""
        need = self.blocks_for(tokens) - held
        if need <= 0:
            return held
        if need > self.free_blocks:
            return None
        self.free_blocks -= need
        if self.on_take is not None:
            self.on_take()
        return held + need

    def release(self, held: int) -> None:
        self.free_blocks += held
