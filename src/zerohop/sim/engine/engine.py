"""The simulated engine: one served model on `tp` simulated GPUs, advancing in real time.

One asyncio task per engine loops over steps. The `Scheduler` plans each step
(vLLM V1-style continuous batching) and prices it with the engine's step-cost model
(`step_cost.StepCostModel`: the profile's roofline unless the caller passes another).
When the step is planned, each sequence's sink prepares the bytes of the token it will
sample (`token_delivery.prepare_writes`); the task then sleeps until the step's end (a
timerfd, then a short busy-wait for precision) and writes the prepared tokens back to
back (`write_prepared`). Only then does it update the sequences and hand each token to
its sink. The lag between a step's modelled end and each write is measured per token:
that is the sim's own emission error, and nothing but writes sits in front of it.
With prefix caching on (`engine.enable_prefix_caching`, the default) the KV pool also
keeps the blocks of computed prompts for later requests (`prefix_cache.PrefixCache`).
On the virtual clock (`zerohop simulate`, `virtual=True`) no token has bytes or a
socket: steps neither prepare nor write, and the sinks hear of each token directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass

from zerohop.sim.config import ServedModelConfig
from zerohop.sim.cost_model.gpu_activity import GpuActivity
from zerohop.sim.cost_model.profiles import MIB, GpuProfile, ModelProfile, Roofline, load_profiles
from zerohop.sim.cost_model.spec_decode import DraftModel, SpeculativeStepCost
from zerohop.sim.cost_model.step_cost import StepCostModel
from zerohop.sim.engine.engine_counters import EngineCounters
from zerohop.sim.engine.histograms import LagRecorder
from zerohop.sim.engine.kv_cache import BlockPool, kv_capacity_blocks
from zerohop.sim.engine.lora import LoraSlots
from zerohop.sim.engine.prefix_cache import PrefixCache
from zerohop.sim.engine.scheduler import Batch, Scheduler
from zerohop.sim.engine.step_timer import StepTimer
from zerohop.sim.engine.token_delivery import prepare_writes, write_prepared
from zerohop.sim.sequence import EngineError, PreparedWrite, Sequence

RESYNC_NS = 50_000_000  # a step that ends this late restarts the clock from "now"


@dataclass
class StepPlan:
    """One scheduled step: which sequences run how many new tokens, and its cost."""

    start_ns: int
    batch: Batch
    cost_s: float
    compute_s: float
    rx_bytes: float
    writes: list[PreparedWrite | None]  # one per batch entry (none on the virtual clock)

    @property
    def end_ns(self) -> int:
        return self.start_ns + int(self.cost_s * 1e9)


class Engine:
    """One served model on `tp` simulated GPUs. `step_cost` prices its steps (default:
    the profile's roofline with the config's overheads); `emission_lag`, if given, gets
    the lag of every token the engine writes."""

    def __init__(
        self,
        served: ServedModelConfig,
        *,
        seed: int = 0,
        max_queue: int | None = None,
        timer_spin_us: int = 300,
        step_cost: StepCostModel | None = None,
        emission_lag: LagRecorder | None = None,
        virtual: bool = False,
    ) -> None:
        book = load_profiles()
        self.virtual = virtual
        self.config = served
        self.name = served.served_name()
        self.gpu: GpuProfile = book.gpu(served.gpu)
        self.model: ModelProfile = book.model(served.model)
        self.tp = served.tp
        self.seed = seed
        self.max_queue = max_queue
        ec = served.engine
        self.engine_config = ec
        if step_cost is None:
            step_cost = Roofline(
                self.gpu,
                self.model,
                tp=served.tp,
                step_overhead_ms=ec.step_overhead_ms,
                tp_allreduce_us_per_layer=ec.tp_allreduce_us_per_layer,
            )
        # speculative decoding with a modelled draft (sim.spec_decode)
        self.draft = None
        if ec.spec_draft_tokens:
            self.draft = DraftModel(ec.spec_draft_tokens, ec.spec_acceptance, seed)
            step_cost = SpeculativeStepCost(
                step_cost, ec.spec_draft_tokens, ec.spec_draft_ms_per_token)
        self.step_cost = step_cost
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
        self.prefix_cache = PrefixCache(self.pool) if ec.enable_prefix_caching else None
        self.max_model_len = ec.max_model_len or self.model.max_position
        self.lora = LoraSlots([a.name for a in served.lora.adapters], served.lora.max_loras)
        self.stats = EngineCounters()
        self.scheduler = Scheduler(
            served,
            model=self.model,
            gpu=self.gpu,
            pool=self.pool,
            lora=self.lora,
            step_cost=self.step_cost,
            stats=self.stats,
            prefix_cache=self.prefix_cache,
            draft=self.draft,
        )
        self.timer = StepTimer(timer_spin_us * 1000)
        self.wake_lag = LagRecorder()  # how late the step clock woke: the step's own error
        self.emission_lag = emission_lag  # each token it writes: write time - step's end
        self.activity = GpuActivity(self.gpu, time.perf_counter_ns())
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def waiting(self) -> deque[Sequence]:
        return self.scheduler.waiting

    @property
    def running(self) -> list[Sequence]:
        return self.scheduler.running

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
        self.scheduler.submit(seq)
        self._wake()

    def abort(self, seq: Sequence) -> None:
        """The client went away (or a fault ended the stream): free everything."""
        self.scheduler.abort(seq)

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

    # --- one step -----------------------------------------------------------------
    def plan_step(self, now_ns: int) -> StepPlan | None:
        """Schedule the step starting at `now_ns` (None: nothing can run)."""
        batch, cost_s, compute_s, rx_bytes = self.scheduler.schedule(now_ns)
        if not batch:
            return None
        writes = [] if self.virtual else prepare_writes(batch)
        return StepPlan(now_ns, batch, cost_s, compute_s, rx_bytes, writes)

    def finish_step(self, plan: StepPlan) -> None:
        """The step's end: write its tokens, then sample them and tell the sinks."""
        end = plan.end_ns
        written = None if self.virtual else write_prepared(plan.writes, end, self.emission_lag)
        self.scheduler.complete(plan.batch, end, written)
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

    # --- what /metrics shows ----------------------------------------------------------
    def memory_used_mib_per_gpu(self) -> float:
        """vLLM reserves its whole KV pool at start: used memory is constant."""
        weights = self.model.weight_bytes / self.tp
        kv = self.pool.num_blocks * self.pool.block_size * self.model.kv_bytes_per_token / self.tp
        reserve = self.engine_config.non_kv_reserve_gib * 1024**3
        return min((weights + kv + reserve) / MIB, float(self.gpu.memory_mib))
