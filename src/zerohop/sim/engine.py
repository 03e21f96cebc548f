"""The simulated engine: vLLM-style continuous batching advancing in real time.

One asyncio task per engine loops over steps. Each step it schedules like vLLM V1:

1. running sequences first, in order: a decoding sequence needs one token, a
   sequence still prefilling needs the rest of its prompt (capped by the token budget,
   i.e. chunked prefill). When the KV cache cannot grow, the last running sequence is
   preempted (its blocks freed, recomputed later from the waiting queue's front);
2. then, if nothing was preempted, waiting sequences are admitted (FCFS) while the
   token budget, `max_num_seqs`, free KV blocks and LoRA slots allow.

The step's duration comes from the roofline (`profiles.Roofline`) plus LoRA costs. When
the step is planned, each sequence's sink prepares the bytes of the token it will
sample (`TokenSink.prepare_token`); the task then sleeps until the step's end (a
timerfd, then a short busy-wait for precision) and writes the prepared tokens back to
back (`write_prepared`). Only then does it update the sequences and hand each token to
its sink. The lag between a step's modelled end and each write is measured per token:
that is the sim's own emission error, and nothing but writes sits in front of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from zerohop.sim.config import ServedModelConfig
from zerohop.sim.histograms import (
    ITL_BUCKETS_S,
    REQUEST_LATENCY_BUCKETS_S,
    TTFT_BUCKETS_S,
    BucketHistogram,
    LagRecorder,
)
from zerohop.sim.kv_cache import BlockPool, kv_capacity_blocks
from zerohop.sim.lora import LoraSlots
from zerohop.sim.profiles import MIB, GpuProfile, ModelProfile, Roofline, load_profiles
from zerohop.sim.step_timer import StepTimer

RESYNC_NS = 50_000_000  # a step that ends this late restarts the clock from "now"


class EngineError(Exception):
    """A typed engine failure. `status` is the HTTP status when raised before the
    response started; after that it travels in-stream with `error_type`."""

    def __init__(self, error_type: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.status = status


PreparedWrite = tuple[Callable[[bytes], object], bytes, Callable[[], bool]]
"""One token ready to go: (write, its bytes, is_closing) of the socket it goes to."""


class TokenSink(Protocol):
    """Where a sequence's tokens go (the HTTP response of its request)."""

    def prepare_token(self, seq: Sequence, finished: bool) -> PreparedWrite | None:
        """The token `seq` samples in the step being planned, for the engine to write
        the moment the step ends; None leaves the write to `on_token`."""
        ...

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        """Token `seq.num_output` was sampled; `written_ns` is when the engine wrote its
        prepared bytes (0: it did not, the sink writes now if it wants to)."""
        ...

    def on_error(self, seq: Sequence, error: EngineError) -> None: ...


class NullSink:
    """A sink that takes nothing: for offline runs that read the token times off the
    Sequence, and for a sequence whose response has ended (`NULL_SINK`), which breaks the
    sequence <-> response reference cycle so both are freed at once instead of piling
    up for a long garbage-collector pause."""

    def prepare_token(self, seq: Sequence, finished: bool) -> None:
        return None

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        return None

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        return None


NULL_SINK = NullSink()


@dataclass(eq=False, slots=True)
class Sequence:
    request_id: str
    prompt_tokens: int
    target_output: int  # tokens this answer will have (<= max_tokens)
    max_tokens: int
    sink: TokenSink
    arrival_ns: int
    adapter: str | None = None
    num_computed: int = 0  # tokens whose KV is in the cache
    num_output: int = 0  # tokens sampled (and handed to the sink)
    blocks: int = 0
    paused_until_ns: int = 0  # a stall fault: not scheduled before this time
    pause_after_tokens: int = -1  # stall_mid: pause once num_output reaches this
    pause_ns: int = 0
    first_scheduled_ns: int | None = None
    first_token_ns: int | None = None  # modelled (scheduled) time of token 1
    last_token_ns: int | None = None
    preemptions: int = 0
    done: bool = False
    finish_reason: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def planned_finish_reason(self) -> str:
        """Why the answer ends once it has `target_output` tokens."""
        return "length" if self.target_output >= self.max_tokens else "stop"


@dataclass
class StepPlan:
    """One scheduled step: which sequences run how many new tokens, and its cost."""

    start_ns: int
    batch: list[tuple[Sequence, int, int]]  # (sequence, context before, new tokens)
    cost_s: float
    compute_s: float
    rx_bytes: float
    writes: list[PreparedWrite | None]  # one per batch entry: the token it will write

    @property
    def end_ns(self) -> int:
        return self.start_ns + int(self.cost_s * 1e9)


@dataclass
class EngineStats:
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    preemptions_total: int = 0
    steps_total: int = 0
    resyncs_total: int = 0
    lora_loads_total: int = 0
    success_total: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0})
    aborted_total: int = 0
    rejected_total: int = 0
    oom_failures_total: int = 0
    ttft: BucketHistogram = field(default_factory=lambda: BucketHistogram(TTFT_BUCKETS_S))
    itl: BucketHistogram = field(default_factory=lambda: BucketHistogram(ITL_BUCKETS_S))
    e2e: BucketHistogram = field(default_factory=lambda: BucketHistogram(REQUEST_LATENCY_BUCKETS_S))
    queue_time: BucketHistogram = field(
        default_factory=lambda: BucketHistogram(REQUEST_LATENCY_BUCKETS_S)
    )


class GpuActivity:
    """Modelled device telemetry: busy fraction, compute share and PCIe traffic as
    exponentially weighted rates (1 s), temperature as a first-order lag (20 s)."""

    TAU_S = 1.0
    THERMAL_TAU_S = 20.0
    AMBIENT_C = 30.0

    def __init__(self, gpu: GpuProfile, now_ns: int) -> None:
        self.gpu = gpu
        self.busy = 0.0
        self.compute_share = 0.0
        self.pcie_rx_bps = 0.0
        self.pcie_tx_bps = 0.0
        self.temp_c = self.AMBIENT_C + 0.08 * gpu.idle_w
        self._last_ns = now_ns
        self._thermal_ns = now_ns

    def record(
        self, now_ns: int, busy_s: float, compute_s: float, rx_bytes: float, tx_bytes: float
    ) -> None:
        dt = max((now_ns - self._last_ns) / 1e9, 1e-6)
        self._last_ns = now_ns
        alpha = 1.0 - math.exp(-dt / self.TAU_S)
        self.busy += (min(busy_s / dt, 1.0) - self.busy) * alpha
        share = compute_s / busy_s if busy_s > 0 else 0.0
        self.compute_share += (share - self.compute_share) * alpha
        self.pcie_rx_bps += (rx_bytes / dt - self.pcie_rx_bps) * alpha
        self.pcie_tx_bps += (tx_bytes / dt - self.pcie_tx_bps) * alpha

    def sample(self, now_ns: int) -> dict[str, float]:
        """Current gauges (decays the rates over idle time first)."""
        if now_ns - self._last_ns > 1_000_000:
            self.record(now_ns, 0.0, 0.0, 0.0, 0.0)
        power = self.gpu.idle_w + (self.gpu.tdp_w - self.gpu.idle_w) * self.busy * (
            0.55 + 0.45 * self.compute_share
        )
        dt = (now_ns - self._thermal_ns) / 1e9
        self._thermal_ns = now_ns
        steady = self.AMBIENT_C + 0.08 * power * (700.0 / max(self.gpu.tdp_w, 1.0)) ** 0.5
        self.temp_c += (steady - self.temp_c) * (1.0 - math.exp(-dt / self.THERMAL_TAU_S))
        busy = self.busy > 0.02
        return {
            "util_pct": 100.0 * self.busy,
            "power_w": power,
            "temp_c": self.temp_c,
            "sm_clock_mhz": float(
                self.gpu.sm_clock_max_mhz if busy else self.gpu.sm_clock_idle_mhz
            ),
            "pcie_rx_bps": self.pcie_rx_bps,
            "pcie_tx_bps": self.pcie_tx_bps,
        }


class Engine:
    """One served model on `tp` simulated GPUs."""

    def __init__(
        self,
        served: ServedModelConfig,
        *,
        seed: int = 0,
        max_queue: int | None = None,
        timer_spin_us: int = 300,
    ) -> None:
        book = load_profiles()
        self.config = served
        self.name = served.served_name()
        self.gpu: GpuProfile = book.gpu(served.gpu)
        self.model: ModelProfile = book.model(served.model)
        self.tp = served.tp
        self.seed = seed
        self.max_queue = max_queue
        ec = served.engine
        self.engine_config = ec
        self.roofline = Roofline(
            self.gpu,
            self.model,
            tp=served.tp,
            step_overhead_ms=ec.step_overhead_ms,
            tp_allreduce_us_per_layer=ec.tp_allreduce_us_per_layer,
        )
        blocks = ec.num_gpu_blocks or kv_capacity_blocks(
            self.gpu,
            self.model,
            tp=served.tp,
            block_size=ec.block_size,
            gpu_memory_utilization=ec.gpu_memory_utilization,
            non_kv_reserve_gib=ec.non_kv_reserve_gib,
        )
        if blocks <= 0:
            raise ValueError(
                f"model {served.model} does not fit {served.tp} x {served.gpu}: "
                "no memory left for the KV cache (raise tp)"
            )
        self.pool = BlockPool(blocks, ec.block_size)
        self.max_model_len = ec.max_model_len or self.model.max_position
        lc = served.lora
        self.lora = LoraSlots([a.name for a in lc.adapters], lc.max_loras)
        self.lora_ranks = {a.name: a.rank for a in lc.adapters}
        self.lora_config = lc
        self.time_scale = ec.time_scale
        self.timer = StepTimer(timer_spin_us * 1000)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.stats = EngineStats()
        self.wake_lag = LagRecorder()  # how late the step clock woke: the step's own error
        self.activity = GpuActivity(self.gpu, time.perf_counter_ns())
        self._last_end_ns = -1
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # --- the public surface the HTTP layer uses --------------------------------------
    def check_request(self, prompt_tokens: int, max_tokens: int, adapter: str | None) -> None:
        """Reject what can never run (HTTP 400 before any streaming)."""
        if prompt_tokens + max_tokens > self.max_model_len:
            raise EngineError(
                "BadRequestError",
                f"This model's maximum context length is {self.max_model_len} tokens. "
                f"However, you requested {prompt_tokens + max_tokens} tokens "
                f"({prompt_tokens} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
            )
        if self.pool.blocks_for(prompt_tokens + 1) > self.pool.num_blocks:
            raise EngineError(
                "BadRequestError",
                f"The prompt ({prompt_tokens} tokens) can never fit the KV cache "
                f"({self.pool.capacity_tokens} tokens).",
            )
        if adapter is not None and adapter not in self.lora.known:
            raise EngineError("NotFoundError", f"The model `{adapter}` does not exist.", 404)

    def queue_full(self) -> bool:
        return self.max_queue is not None and len(self.waiting) >= self.max_queue

    def submit(self, seq: Sequence) -> None:
        self.waiting.append(seq)
        self._wake()

    def abort(self, seq: Sequence) -> None:
        """The client went away (or a fault ended the stream): free everything."""
        if seq.done:
            return
        seq.done = True
        self.stats.aborted_total += 1
        self._remove(seq)

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=f"engine:{self.name}")
        return self._task

    async def stop(self) -> None:
        self._closed = True
        self._wake()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.timer.close()

    def kv_usage(self) -> float:
        return self.pool.usage()

    def step_seconds(self, chunks: list[tuple[int, int]]) -> float:
        """Modelled duration of a batch (context, new tokens) without LoRA costs."""
        return self.roofline.step_s(chunks)[0] * self.time_scale

    # --- the loop ---------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        clock = time.perf_counter_ns
        step_start = 0
        idle = True
        while not self._closed:
            now = clock()
            if idle or now - step_start > RESYNC_NS:
                if not idle:
                    self.stats.resyncs_total += 1
                step_start = now
            plan = self.plan_step(step_start)
            if plan is None:
                idle = True
                await self._wait_for_work(loop)
                continue
            idle = False
            end = plan.end_ns
            await self.timer.sleep_until(end)
            woke = clock()
            self.finish_step(plan)
            self.wake_lag.add_ns(woke - end)
            step_start = end

    async def _wait_for_work(self, loop: asyncio.AbstractEventLoop) -> None:
        """Sleep until a submit, or until the earliest paused sequence may resume."""
        self._wakeup = loop.create_future()
        resume = [s.paused_until_ns for s in self.running if s.paused_until_ns]
        resume += [s.paused_until_ns for s in self.waiting if s.paused_until_ns]
        timeout = None
        if resume:
            timeout = max(0.0, (min(resume) - time.perf_counter_ns()) / 1e9) + 0.0005
        elif self.waiting:
            timeout = 0.01  # blocked on LoRA slots or memory: re-check soon
        try:
            await asyncio.wait_for(self._wakeup, timeout)
        except TimeoutError:
            pass
        finally:
            self._wakeup = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    # --- scheduling -----------------------------------------------------------------
    def plan_step(self, now_ns: int) -> StepPlan | None:
        """Schedule the step starting at `now_ns` (None: nothing can run)."""
        batch, cost_s, compute_s, rx_bytes = self._schedule(now_ns)
        if not batch:
            return None
        return StepPlan(now_ns, batch, cost_s, compute_s, rx_bytes, _prepare_writes(batch))

    def finish_step(self, plan: StepPlan) -> None:
        """The step's end: write its tokens, then sample them and tell the sinks."""
        end = plan.end_ns
        written = write_prepared(plan.writes)
        self._complete(plan.batch, end, written)
        self.stats.steps_total += 1
        self.activity.record(
            end, plan.cost_s, plan.compute_s, plan.rx_bytes, 8.0 * len(plan.batch) + 4096
        )

    def simulate_step(self, now_ns: int) -> int | None:
        """plan_step + finish_step without waiting (offline use and unit tests);
        returns the step's end time."""
        plan = self.plan_step(now_ns)
        if plan is None:
            return None
        self.finish_step(plan)
        return plan.end_ns

    def _schedule(self, now_ns: int) -> tuple[list[tuple[Sequence, int, int]], float, float, float]:
        ec = self.engine_config
        budget = ec.max_num_batched_tokens
        pool = self.pool
        batch: list[tuple[Sequence, int, int]] = []
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
            batch.append((seq, seq.num_computed, new))
            budget -= new
            i += 1
        cold_loads = 0
        if not preempted and self.waiting:
            cold_loads, budget = self._admit(now_ns, budget, batch)
        if not batch:
            return batch, 0.0, 0.0, 0.0
        step_s, compute_s, _memory_s = self.roofline.step_s([(c, n) for _, c, n in batch])
        if self.lora.known:
            step_s += self._lora_cost_s(batch, cold_loads)
        rx = 4.0 * (ec.max_num_batched_tokens - budget) + 64.0 * len(batch) + 16384.0
        if cold_loads:
            rx += cold_loads * self.model.lora_bytes(16)
        return batch, step_s * self.time_scale, compute_s * self.time_scale, rx

    def _admit(
        self, now_ns: int, budget: int, batch: list[tuple[Sequence, int, int]]
    ) -> tuple[int, int]:
        ec = self.engine_config
        pool = self.pool
        skipped: list[Sequence] = []
        cold_loads = 0
        in_use = {s.adapter for s in self.running if s.adapter is not None}
        while self.waiting and budget > 0 and len(self.running) < ec.max_num_seqs:
            seq = self.waiting.popleft()
            if seq.paused_until_ns > now_ns:
                skipped.append(seq)
                continue
            new = min(seq.prompt_tokens + seq.num_output - seq.num_computed, budget)
            grown = pool.try_grow(seq.blocks, seq.num_computed + new)
            if grown is None:
                self.waiting.appendleft(seq)  # the cache is full: the queue waits
                break
            if seq.adapter is not None:
                loaded = self.lora.acquire(seq.adapter, in_use)
                if loaded is None:
                    pool.release(grown - seq.blocks)
                    skipped.append(seq)
                    continue
                if loaded:
                    cold_loads += 1
                    self.stats.lora_loads_total += 1
                in_use.add(seq.adapter)
            seq.blocks = grown
            if seq.first_scheduled_ns is None:
                seq.first_scheduled_ns = now_ns
                self.stats.queue_time.observe((now_ns - seq.arrival_ns) / 1e9)
            self.running.append(seq)
            batch.append((seq, seq.num_computed, new))
            budget -= new
        self.waiting.extendleft(reversed(skipped))
        return cold_loads, budget

    def _lora_cost_s(self, batch: list[tuple[Sequence, int, int]], cold_loads: int) -> float:
        adapters = {s.adapter for s, _, _ in batch if s.adapter is not None}
        if not adapters and not cold_loads:
            return 0.0
        lc = self.lora_config
        cost_ms = lc.step_overhead_ms if adapters else 0.0
        distinct = len(adapters) + (1 if any(s.adapter is None for s, _, _ in batch) else 0)
        cost_ms += lc.mixed_batch_ms_per_adapter * max(0, distinct - 1)
        if cold_loads:
            cost_ms += cold_loads * self._lora_load_ms()
        for adapter in adapters:
            self.lora.touch(adapter)
        return cost_ms / 1e3

    def _lora_load_ms(self) -> float:
        lc = self.lora_config
        if lc.load_ms is not None:
            return lc.load_ms
        rank = max(self.lora_ranks.values(), default=16)
        return 5.0 + self.model.lora_bytes(rank) / (self.gpu.pcie_gbps * 1e9) * 1e3

    def _preempt(self, seq: Sequence) -> None:
        limit = self.engine_config.max_preemptions
        if limit is not None and seq.preemptions >= limit:
            seq.preemptions += 1
            self.stats.preemptions_total += 1
            self.stats.oom_failures_total += 1
            self._fail(seq, _out_of_memory_preempted(seq, limit))
            return
        self.running.remove(seq)
        self.pool.release(seq.blocks)
        seq.blocks = 0
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
        self.pool.release(seq.blocks)
        seq.blocks = 0

    # --- step completion ----------------------------------------------------------------
    def _complete(
        self, batch: list[tuple[Sequence, int, int]], end_ns: int, written: list[int]
    ) -> None:
        """Sample this step's tokens (already written where prepared) and hand them to
        the sinks, then the step's statistics."""
        prev_end = self._last_end_ns
        steady_itl = 0  # tokens whose previous token came from the previous step
        firsts: list[Sequence] = []
        finished_seqs: list[Sequence] = []
        other_itls: list[int] = []
        for (seq, _context, new), written_ns in zip(batch, written, strict=True):
            if seq.done:
                continue  # aborted while the step ran
            computed = seq.num_computed + new
            seq.num_computed = computed
            n = seq.num_output
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
        self._last_end_ns = end_ns
        stats = self.stats
        stats.generation_tokens_total += steady_itl + len(firsts) + len(other_itls)
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
            if seq.blocks or seq in self.running:
                self._remove(seq)

    # --- what /metrics shows ----------------------------------------------------------
    def memory_used_mib_per_gpu(self) -> float:
        """vLLM reserves its whole KV pool at start: used memory is constant."""
        weights = self.model.weight_bytes / self.tp
        kv = self.pool.num_blocks * self.pool.block_size * self.model.kv_bytes_per_token / self.tp
        reserve = self.engine_config.non_kv_reserve_gib * 1024**3
        return min((weights + kv + reserve) / MIB, float(self.gpu.memory_mib))


def _prepare_writes(batch: list[tuple[Sequence, int, int]]) -> list[PreparedWrite | None]:
    """Ask each sequence that will sample a token in this step for its bytes now, while
    the step runs, so that its end is nothing but writes."""
    writes: list[PreparedWrite | None] = []
    for seq, context, new in batch:
        if context + new < seq.prompt_tokens + seq.num_output:
            writes.append(None)  # a prefill chunk: no token this step
        else:
            finished = seq.num_output + 1 >= seq.target_output
            writes.append(seq.sink.prepare_token(seq, finished))
    return writes


def write_prepared(writes: list[PreparedWrite | None]) -> list[int]:
    """The step's end: every prepared token to its socket, back to back, and the time
    each write returned (0: not written here). This loop is the emission lag; keep it
    this small."""
    clock = time.perf_counter_ns
    stamps: list[int] = []
    stamp = stamps.append
    for prepared in writes:
        if prepared is None:
            stamp(0)
            continue
        write, data, is_closing = prepared
        if is_closing():  # the client left while the step ran
            stamp(0)
            continue
        write(data)
        stamp(clock())
    return stamps


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
