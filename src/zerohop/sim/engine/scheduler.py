"""vLLM V1-style scheduling of one engine's sequences over a paged KV cache.

Each step schedules like vLLM V1:

1. running sequences first, in order: a decoding sequence needs one token, a
   sequence still prefilling needs the rest of its prompt (capped by the token budget,
   i.e. chunked prefill). When the KV cache cannot grow, the last running sequence is
   preempted (its blocks freed, recomputed later from the waiting queue's front);
2. then, if nothing was preempted, waiting sequences are admitted (FCFS) while the
   token budget, `max_num_seqs`, free KV blocks and LoRA slots allow. With prefix
   caching, an admitted sequence first takes the cached blocks of its prompt's longest
   cached prefix (`prefix_cache.PrefixCache`) and computes only the rest. A PD decode
   sequence (`sim.pd_roles`) is admitted with its transferred prompt KV present and
   computes only the prompt's last token (unless preempted: then it recomputes).

With a modelled draft (`spec_decode.DraftModel`), a decode step also hands out the
drafts it accepted, right after the step's own token.

A step's duration is the step-cost model's (`step_cost.StepCostModel`) plus what LoRA
adds, times the engine's `time_scale`. The scheduler has no clock and does no I/O: the
engine says when a step starts (`schedule`) and when it ends (`complete`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from itertools import repeat

from zerohop.sim.config import ServedModelConfig
from zerohop.sim.cost_model.profiles import GpuProfile, ModelProfile
from zerohop.sim.cost_model.spec_decode import DraftModel
from zerohop.sim.cost_model.step_cost import StepCostModel, split_decodes
from zerohop.sim.engine.engine_counters import EngineCounters
from zerohop.sim.engine.kv_cache import BlockPool
from zerohop.sim.engine.lora import LoraSlots
from zerohop.sim.engine.prefix_cache import PrefixCache
from zerohop.sim.sequence import EngineError, Sequence

Batch = list[tuple[Sequence, int, int]]
"""One step's work: (sequence, context tokens before the step, new tokens) each."""


class Scheduler:
    """The waiting queue, the running batch and what each step runs."""

    def __init__(
        self,
        served: ServedModelConfig,
        *,
        model: ModelProfile,
        gpu: GpuProfile,
        pool: BlockPool,
        lora: LoraSlots,
        step_cost: StepCostModel,
        stats: EngineCounters,
        prefix_cache: PrefixCache | None = None,
        draft: DraftModel | None = None,
    ) -> None:
        self.engine_config = served.engine
        self.lora_config = served.lora
        self.time_scale = served.engine.time_scale
        self.pool = pool
        self.lora = lora
        self.step_cost = step_cost
        self.stats = stats
        self.prefix_cache = prefix_cache
        self.draft = draft
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.lora_load_ms = _lora_load_ms(served, model, gpu)
        self.lora_load_bytes = model.lora_bytes(16)  # PCIe traffic of one cold load
        self._last_end_ns = -1

    def submit(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def abort(self, seq: Sequence) -> None:
        """The client went away (or a fault ended the stream): free everything."""
        if seq.done:
            return
        seq.done = True
        self.stats.aborted_total += 1
        self._remove(seq)

    # --- scheduling -----------------------------------------------------------------
    def schedule(self, now_ns: int) -> tuple[Batch, float, float, float]:
        """The step starting at `now_ns`: its batch, then its cost, compute and PCIe
        bytes received (an empty batch: nothing can run)."""
        ec = self.engine_config
        budget = ec.max_num_batched_tokens
        pool = self.pool
        batch: Batch = []
        decodes = decode_context = 0  # priced summed (StepCostModel.batch_s)
        others: list[tuple[int, int]] = []  # the slow path's and admissions' shares
        preempted = False
        running = self.running
        block_size = pool.block_size
        append = batch.append
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            if seq.paused_until_ns > now_ns:
                i += 1
                continue
            computed = seq.num_computed
            new = seq.prompt_tokens + seq.num_output - computed
            if new == 1 and computed < seq.blocks * block_size:
                append((seq, computed, 1))  # the common decode step: no new block needed
                decodes += 1
                decode_context += computed
                budget -= 1
                i += 1
                continue
            new = min(new, budget)
            if new <= 0:
                i += 1
                continue
            target = computed + new
            while True:
                grown = pool.try_grow(seq.blocks, target)
                if grown is not None:
                    seq.blocks = grown
                    break
                if pool.blocks_for(target) > pool.num_blocks or len(running) == 1:
                    self._fail(seq, _out_of_memory(seq, pool))
                    seq = None  # type: ignore[assignment]
                    break
                victim = running[-1]
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    seq = None  # type: ignore[assignment]
                    break
            if seq is None:
                continue  # `running` shrank; index i now points at the next one
            append((seq, seq.num_computed, new))
            others.append((seq.num_computed, new))
            budget -= new
            i += 1
        cold_loads = 0
        before_admission = len(batch)
        if not preempted and self.waiting:
            cold_loads, budget = self._admit(now_ns, budget, batch)
        if not batch:
            return batch, 0.0, 0.0, 0.0
        others.extend((c, n) for _, c, n in batch[before_admission:])
        # a decode that needed a new block is priced with the fast path's
        more, more_context, chunks = split_decodes(others)
        step_s, compute_s, _memory_s = self.step_cost.batch_s(
            decodes + more, decode_context + more_context, chunks)
        if self.lora.known:
            step_s += self._lora_cost_s(batch, cold_loads)
        rx = 4.0 * (ec.max_num_batched_tokens - budget) + 64.0 * len(batch) + 16384.0
        if cold_loads:
            rx += cold_loads * self.lora_load_bytes
        return batch, step_s * self.time_scale, compute_s * self.time_scale, rx

    def _admit(self, now_ns: int, budget: int, batch: Batch) -> tuple[int, int]:
        ec = self.engine_config
        pool = self.pool
        skipped: list[Sequence] = []
        cache = self.prefix_cache
        cold_loads = 0
        in_use = {s.adapter for s in self.running if s.adapter is not None}
        while self.waiting and budget > 0 and len(self.running) < ec.max_num_seqs:
            seq = self.waiting.popleft()
            if seq.paused_until_ns > now_ns:
                skipped.append(seq)
                continue
            # a waiting sequence holds no blocks and has nothing computed
            hit = cache.match(seq.block_hashes, seq.prompt_tokens) if cache else 0
            cached = local_hit = hit * pool.block_size
            if seq.remote_kv_tokens and not seq.preemptions:  # PD decode: KV transferred
                cached = max(cached, seq.remote_kv_tokens)
            new = min(seq.prompt_tokens + seq.num_output - cached, budget)
            if cache is not None:
                fits = cache.allocate(seq, hit, cached + new)
            else:
                grown = pool.try_grow(0, new)
                fits = grown is not None
                seq.blocks = grown or 0
            if not fits:
                self.waiting.appendleft(seq)  # the cache is full: the queue waits
                break
            if seq.adapter is not None:
                loaded = self.lora.acquire(seq.adapter, in_use)
                if loaded is None:
                    self._free(seq)
                    skipped.append(seq)
                    continue
                if loaded:
                    cold_loads += 1
                    self.stats.lora_loads_total += 1
                in_use.add(seq.adapter)
            seq.num_computed = cached
            if cache is not None and not seq.preemptions:  # vLLM counts recomputes apart
                self.stats.prefix_cache_queries_total += seq.prompt_tokens
                self.stats.prefix_cache_hits_total += local_hit
            if seq.first_scheduled_ns is None:
                seq.first_scheduled_ns = now_ns
                seq.num_cached = local_hit
            self.running.append(seq)
            batch.append((seq, seq.num_computed, new))
            budget -= new
        self.waiting.extendleft(reversed(skipped))
        return cold_loads, budget

    def _lora_cost_s(self, batch: Batch, cold_loads: int) -> float:
        adapters = {s.adapter for s, _, _ in batch if s.adapter is not None}
        if not adapters and not cold_loads:
            return 0.0
        lc = self.lora_config
        cost_ms = lc.step_overhead_ms if adapters else 0.0
        distinct = len(adapters) + (1 if any(s.adapter is None for s, _, _ in batch) else 0)
        cost_ms += lc.mixed_batch_ms_per_adapter * max(0, distinct - 1)
        if cold_loads:
            cost_ms += cold_loads * self.lora_load_ms
        for adapter in adapters:
            self.lora.touch(adapter)
        return cost_ms / 1e3

    def _preempt(self, seq: Sequence) -> None:
        limit = self.engine_config.max_preemptions
        if limit is not None and seq.preemptions >= limit:
            seq.preemptions += 1
            self.stats.preemptions_total += 1
            self.stats.oom_failures_total += 1
            self._fail(seq, _out_of_memory_preempted(seq, limit))
            return
        self.running.remove(seq)
        self._free(seq)
        seq.num_computed = 0
        seq.preemptions += 1
        self.stats.preemptions_total += 1
        self.waiting.appendleft(seq)

    def _fail(self, seq: Sequence, error: EngineError) -> None:
        seq.done = True
        self._remove(seq)
        seq.sink.on_error(seq, error)

    def _remove(self, seq: Sequence) -> None:
        if seq in self.running:
            self.running.remove(seq)
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove(seq)
        self._free(seq)

    def _free(self, seq: Sequence) -> None:
        """Give back every block `seq` holds (cached ones stay resident, evictable)."""
        if self.prefix_cache is not None:
            self.prefix_cache.release(seq)
        else:
            self.pool.release(seq.blocks)
            seq.blocks = 0

    # --- step completion ----------------------------------------------------------------
    def complete(self, batch: Batch, end_ns: int, written: list[int] | None) -> None:
        """Sample this step's tokens (already written where prepared; `written` None:
        nothing is written, on the virtual clock) and hand them to the sinks, then the
        step's statistics."""
        prev_end = self._last_end_ns
        cache = self.prefix_cache
        steady_itl = 0  # tokens whose previous token came from the previous step
        firsts: list[Sequence] = []
        finished_seqs: list[Sequence] = []
        other_itls: list[int] = []
        stamps = written if written is not None else repeat(0, len(batch))
        draft = self.draft
        drafted = 0  # accepted draft tokens handed out after their step's own token
        for (seq, context, new), written_ns in zip(batch, stamps, strict=True):
            if seq.done:
                continue  # aborted while the step ran
            computed = seq.num_computed + new
            seq.num_computed = computed
            n = seq.num_output
            # only a chunk that computed part of the prompt can name blocks for the
            # prefix cache (a decode's token comes after the prompt)
            if computed - new < seq.prompt_tokens and cache is not None \
                    and seq.blocks_hashed < len(seq.block_hashes):
                cache.register(seq)  # prompt blocks it just computed: others may hit them
            if computed < seq.prompt_tokens + n:
                continue  # a prefill chunk: no token yet
            n += 1
            seq.num_output = n
            last = seq.last_token_ns
            if n == 1:
                seq.first_token_ns = end_ns
                firsts.append(seq)
            elif last == prev_end:
                steady_itl += 1
            elif last is not None:
                other_itls.append(end_ns - last)
            seq.last_token_ns = end_ns
            if n >= seq.target_output:
                seq.done = True
                seq.finish_reason = seq.planned_finish_reason
                finished_seqs.append(seq)
                seq.sink.on_token(seq, end_ns, True, written_ns)
            else:
                if n == seq.pause_after_tokens:
                    seq.paused_until_ns = end_ns + seq.pause_ns
                seq.sink.on_token(seq, end_ns, False, written_ns)
            if draft is not None and new == 1 and context >= seq.prompt_tokens:
                # a decode step verified K drafts: its accepted ones follow its token,
                # up to the answer's end (the counters count every draw)
                accepted = min(draft.verify(), seq.target_output - n)
                for _ in range(accepted):
                    if seq.done:
                        break  # a fault ended the stream at the token before
                    n += 1
                    seq.num_output = n
                    seq.num_computed += 1  # an accepted draft's KV was computed in the step
                    drafted += 1
                    if self._deliver(seq, n, end_ns, 0):
                        finished_seqs.append(seq)
        self._last_end_ns = end_ns
        stats = self.stats
        stats.generation_tokens_total += steady_itl + len(firsts) + len(other_itls) + drafted
        if steady_itl:
            stats.itl.observe_n((end_ns - prev_end) / 1e9, steady_itl)
        for gap in other_itls:
            stats.itl.observe(gap / 1e9)
        for seq in firsts:
            stats.prompt_tokens_total += seq.prompt_tokens
            stats.ttft.observe((end_ns - seq.arrival_ns) / 1e9)
        for seq in finished_seqs:
            stats.success_total[seq.finish_reason or "length"] += 1
            stats.e2e.observe((end_ns - seq.arrival_ns) / 1e9)
            _observe_phases(stats, seq, end_ns)
            if seq.blocks or seq in self.running:
                self._remove(seq)

    @staticmethod
    def _deliver(seq: Sequence, n: int, end_ns: int, written_ns: int) -> bool:
        """Accepted draft token `n` of `seq` to its sink; True when it was the answer's
        last. The step's own token does the same inline: that loop is the hot path
        (tests/bench/bench_sim_step_cpu.py), where a call per token shows."""
        if n >= seq.target_output:
            seq.done = True
            seq.finish_reason = seq.planned_finish_reason
            seq.sink.on_token(seq, end_ns, True, written_ns)
            return True
        if n == seq.pause_after_tokens:
            seq.paused_until_ns = end_ns + seq.pause_ns
        seq.sink.on_token(seq, end_ns, False, written_ns)
        return False


def _observe_phases(stats: EngineCounters, seq: Sequence, end_ns: int) -> None:
    """A finished request's queue, prefill and decode times (vLLM's definitions)."""
    scheduled, first = seq.first_scheduled_ns, seq.first_token_ns
    if scheduled is None or first is None:
        return
    stats.queue_time.observe((scheduled - seq.arrival_ns) / 1e9)
    stats.prefill_time.observe((first - scheduled) / 1e9)
    stats.decode_time.observe((end_ns - first) / 1e9)


def _lora_load_ms(served: ServedModelConfig, model: ModelProfile, gpu: GpuProfile) -> float:
    """Loading one adapter: the configured time, or its bytes over PCIe plus 5 ms."""
    lc = served.lora
    if lc.load_ms is not None:
        return lc.load_ms
    rank = max((a.rank for a in lc.adapters), default=16)
    return 5.0 + model.lora_bytes(rank) / (gpu.pcie_gbps * 1e9) * 1e3


def _out_of_memory(seq: Sequence, pool: BlockPool) -> EngineError:
    return EngineError(
        "out_of_memory",
        f"KV cache exhausted: request {seq.request_id} needs "
        f"{pool.blocks_for(seq.num_computed + 1)} blocks of {pool.num_blocks}; "
        "nothing left to preempt",
        status=500,
    )


def _out_of_memory_preempted(seq: Sequence, limit: int) -> EngineError:
    return EngineError(
        "out_of_memory",
        f"KV cache exhausted: request {seq.request_id} was preempted {seq.preemptions} "
        f"time(s) (limit {limit}) and is aborted; reduce load, context or max_tokens",
        status=500,
    )
