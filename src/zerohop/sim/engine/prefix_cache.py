"""Automatic prefix caching over the paged KV pool, the way vLLM V1 does it.

A prompt's full blocks are named by a hash chain, `hash(parent, block tokens)`, so two
prompts share block `i` only when their first `(i + 1) × block_size` tokens agree (the
first block's parent names the LoRA adapter: adapters never share KV). The last,
partial block is never cached.

Blocks a sequence computes are registered under their hash once the step that computes
them ends. A cached block is referenced by every running sequence that uses it and
occupies the pool once. When the last reference goes, the block stays resident but
counts as free: the next allocation that needs room evicts the least recently freed
first (a sequence frees its blocks tail first, so a shared prefix outlives its
continuations). A hit sets the sequence's computed tokens, so the step-cost model
prices only the uncached suffix, with the cached part as attention context. As in vLLM,
at least the prompt's last token is always computed (its logits give token 1).
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Sequence as Seq
from typing import Any

from zerohop.sim.answers.tokenize import request_prompt_ids
from zerohop.sim.engine.kv_cache import BlockPool
from zerohop.sim.sequence import Sequence

__all__ = ["PrefixCache", "chain_hashes", "peek_cached_tokens", "request_block_hashes"]


def chain_hashes(
    token_ids: Seq[int], block_size: int, *, limit_tokens: int | None = None,
    adapter: str | None = None,
) -> tuple[int, ...]:
    """The hash of every full block of `token_ids` (of its first `limit_tokens`), each
    chained to the one before it."""
    n = len(token_ids) if limit_tokens is None else min(len(token_ids), limit_tokens)
    parent = zlib.crc32(f"zerohop-prefix:{adapter or ''}".encode())
    out: list[int] = []
    for start in range(0, n - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        out.append(parent)
    return tuple(out)


def request_block_hashes(
    cache: PrefixCache | None, api: str, body: dict[str, Any], prompt_tokens: int,
    adapter: str | None,
) -> tuple[int, ...]:
    """The block hashes of a generation request's prompt (its ids as /tokenize gives
    them); none when the engine does not cache or the prompt has no ids."""
    if cache is None:
        return ()
    try:
        ids = request_prompt_ids(api, body)
    except ValueError:  # a prompt shape the counting rule accepts but ids do not
        return ()
    return chain_hashes(ids, cache.pool.block_size, limit_tokens=prompt_tokens, adapter=adapter)


def peek_cached_tokens(
    cache: PrefixCache | None, hashes: tuple[int, ...], prompt_tokens: int
) -> int:
    """Prompt tokens the cache holds now for these hashes (what a response that starts
    before its request is scheduled reports; the scheduler decides the real hit)."""
    if cache is None:
        return 0
    return cache.match(hashes, prompt_tokens) * cache.pool.block_size


class PrefixCache:
    """Hash → resident block, with reference counts and an LRU of unreferenced ones."""

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self._refs: dict[int, int] = {}  # every resident cached block: its references
        self._evictable: OrderedDict[int, None] = OrderedDict()  # refs 0, oldest first
        pool.on_take = self._reclaim

    @property
    def resident_blocks(self) -> int:
        return len(self._refs)

    @property
    def evictable_blocks(self) -> int:
        return len(self._evictable)

    def match(self, hashes: tuple[int, ...], prompt_tokens: int) -> int:
        """Leading blocks of `hashes` resident now, leaving the prompt's last token to
        compute."""
        limit = min(len(hashes), (prompt_tokens - 1) // self.pool.block_size)
        refs = self._refs
        n = 0
        while n < limit and hashes[n] in refs:
            n += 1
        return n

    def allocate(self, seq: Sequence, hit_blocks: int, tokens: int) -> bool:
        """Give a waiting `seq` (holding nothing) its first `hit_blocks` cached blocks
        and private blocks up to `tokens`; False, touching nothing, when they don't fit."""
        pool = self.pool
        hit = seq.block_hashes[:hit_blocks]
        refs = self._refs
        revived = sum(1 for h in hit if refs[h] == 0)
        if pool.blocks_for(tokens) - hit_blocks + revived > pool.free_blocks:
            return False
        for h in hit:
            if refs[h] == 0:
                del self._evictable[h]
            refs[h] += 1
        pool.free_blocks -= revived
        seq.cache_refs = list(hit)
        seq.blocks_hashed = hit_blocks
        grown = pool.try_grow(hit_blocks, tokens)
        assert grown is not None  # checked above
        seq.blocks = grown
        return True

    def register(self, seq: Sequence) -> None:
        """Name the prompt blocks `seq` has computed so others can hit them. A block
        another sequence registered first stays private (the copies are not merged)."""
        hashes = seq.block_hashes
        full = min(len(hashes), seq.num_computed // self.pool.block_size)
        refs = self._refs
        for i in range(seq.blocks_hashed, full):
            h = hashes[i]
            if h not in refs:
                refs[h] = 1
                seq.cache_refs.append(h)
        if full > seq.blocks_hashed:
            seq.blocks_hashed = full

    def release(self, seq: Sequence) -> None:
        """Free every block `seq` holds: private ones at once, cached ones when their
        last reference goes (they stay resident, evictable)."""
        held = seq.cache_refs
        freed = seq.blocks - len(held)
        refs = self._refs
        evictable = self._evictable
        for h in reversed(held):  # tail first: the shared head is evicted last
            n = refs[h] - 1
            refs[h] = n
            if n == 0:
                evictable[h] = None
                freed += 1
        self.pool.release(freed)
        seq.cache_refs = []
        seq.blocks = 0
        seq.blocks_hashed = 0

    def _reclaim(self) -> None:
        """An allocation took free blocks: evict the oldest cached ones it overwrote."""
        evictable = self._evictable
        over = len(evictable) - self.pool.free_blocks
        refs = self._refs
        for _ in range(over):
            h, _ = evictable.popitem(last=False)
            del refs[h]
