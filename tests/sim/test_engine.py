"""The scheduler, driven step by step without sleeping (Engine.simulate_step)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest

from zerohop.sim.config import EngineConfig, LoraConfig, ServedModelConfig
from zerohop.sim.engine.engine import Engine
from zerohop.sim.sequence import EngineError, NullSink, Sequence

pytestmark = pytest.mark.unit


@dataclass
class Collector(NullSink):
    """A TokenSink that remembers when each token was emitted (it writes nothing)."""

    times: dict[str, list[int]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    errors: dict[str, str] = field(default_factory=dict)

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        self.times.setdefault(seq.request_id, []).append(scheduled_ns)
        if finished:
            self.finished.add(seq.request_id)

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        self.errors[seq.request_id] = error.error_type


def make_engine(lora: dict[str, object] | None = None, **engine: object) -> Engine:
    served = ServedModelConfig(
        gpu="h100-sxm",
        model="llama-3-8b",
        engine=EngineConfig.model_validate(engine),
        lora=LoraConfig.model_validate(lora or {}),
    )
    return Engine(served)


def submit(
    engine: Engine,
    sink: Collector,
    rid: str,
    prompt: int,
    out: int,
    adapter: str | None = None,
    at: int = 0,
) -> Sequence:
    seq = Sequence(
        request_id=rid,
        prompt_tokens=prompt,
        target_output=out,
        max_tokens=out,
        sink=sink,
        arrival_ns=at,
        adapter=adapter,
    )
    engine.submit(seq)
    return seq


def run_until_idle(engine: Engine, start: int = 0, max_steps: int = 100_000) -> int:
    now = start
    for _ in range(max_steps):
        end = engine.simulate_step(now)
        if end is None:
            return now
        now = end
    raise AssertionError("engine did not drain")


def test_single_request_emits_every_token_once_at_step_ends() -> None:
    engine, sink = make_engine(), Collector()
    submit(engine, sink, "a", prompt=1000, out=20)
    run_until_idle(engine)
    times = sink.times["a"]
    assert len(times) == 20 and "a" in sink.finished
    ttft_ms = times[0] / 1e6
    assert ttft_ms == pytest.approx(engine.step_cost.prefill_s(1000) * 1e3, rel=0.01)
    gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(times)]
    assert all(g == pytest.approx(engine.step_cost.decode_s(1, 1010) * 1e3, rel=0.05) for g in gaps)
    assert engine.pool.free_blocks == engine.pool.num_blocks  # all blocks returned
    assert engine.stats.prompt_tokens_total == 1000
    assert engine.stats.generation_tokens_total == 20


def test_chunked_prefill_splits_long_prompts_by_the_token_budget() -> None:
    engine, sink = make_engine(max_num_batched_tokens=2048), Collector()
    submit(engine, sink, "long", prompt=5000, out=2)
    steps = 0
    now = 0
    while "long" not in sink.times:
        now = engine.simulate_step(now) or now
        steps += 1
    assert steps == 3  # 2048 + 2048 + 904


def test_tpot_grows_with_batch_size() -> None:
    def decode_gap_ms(batch: int) -> float:
        engine, sink = make_engine(), Collector()
        for i in range(batch):
            submit(engine, sink, f"r{i}", prompt=200, out=30)
        run_until_idle(engine)
        t = sink.times["r0"]
        return (t[-1] - t[1]) / (len(t) - 2) / 1e6

    one, many = decode_gap_ms(1), decode_gap_ms(200)
    assert many > 1.3 * one


def test_max_num_seqs_caps_the_batch_and_the_rest_wait() -> None:
    engine, sink = make_engine(max_num_seqs=4), Collector()
    for i in range(10):
        submit(engine, sink, f"r{i}", prompt=50, out=5)
    engine.simulate_step(0)
    assert len(engine.running) == 4 and len(engine.waiting) == 6
    run_until_idle(engine)
    assert len(sink.finished) == 10


def test_queueing_when_the_cache_is_full_then_preemption_in_decode() -> None:
    # 40 blocks x 16 = 640 tokens of KV: four 150-token prompts fit, their decode does not
    engine, sink = make_engine(num_gpu_blocks=40, block_size=16), Collector()
    for i in range(6):
        submit(engine, sink, f"r{i}", prompt=150, out=60)
    engine.simulate_step(0)
    assert len(engine.running) == 4 and len(engine.waiting) == 2  # queued: no blocks left
    run_until_idle(engine)
    assert engine.stats.preemptions_total > 0
    assert sink.finished == {f"r{i}" for i in range(6)}
    assert all(len(sink.times[f"r{i}"]) == 60 for i in range(6))  # no token twice
    assert engine.pool.free_blocks == engine.pool.num_blocks


def test_a_lone_sequence_that_outgrows_the_cache_fails_out_of_memory() -> None:
    engine, sink = make_engine(num_gpu_blocks=10, block_size=16), Collector()  # 160 tokens
    submit(engine, sink, "big", prompt=100, out=100)
    run_until_idle(engine)
    assert sink.errors == {"big": "out_of_memory"}
    assert engine.pool.free_blocks == engine.pool.num_blocks


def test_requests_that_can_never_fit_are_rejected_up_front() -> None:
    engine = make_engine(num_gpu_blocks=10, block_size=16, max_model_len=4096)
    with pytest.raises(EngineError) as err:
        engine.check_request(prompt_tokens=4000, max_tokens=200, adapter=None)
    assert err.value.status == 400 and "maximum context length" in err.value.message
    with pytest.raises(EngineError, match="never fit"):
        engine.check_request(prompt_tokens=500, max_tokens=10, adapter=None)
    with pytest.raises(EngineError) as missing:
        engine.check_request(prompt_tokens=5, max_tokens=5, adapter="nope")
    assert missing.value.status == 404


def test_lora_cold_load_costs_time_and_slots_are_lru() -> None:
    lora = {"adapters": ["a", "b"], "max_loras": 1, "load_ms": 40.0}
    engine, sink = make_engine(lora=lora), Collector()
    submit(engine, sink, "cold", prompt=100, out=3, adapter="a")
    end = run_until_idle(engine)
    submit(engine, sink, "warm", prompt=100, out=3, adapter="a", at=end)
    end2 = run_until_idle(engine, start=end)
    cold_ttft = sink.times["cold"][0] / 1e6
    warm_ttft = (sink.times["warm"][0] - end) / 1e6
    assert cold_ttft - warm_ttft == pytest.approx(40.0, abs=1.0)
    # one slot: "b" must wait until no running request uses "a"
    submit(engine, sink, "a2", prompt=100, out=50, adapter="a", at=end2)
    submit(engine, sink, "b1", prompt=100, out=3, adapter="b", at=end2)
    engine.simulate_step(end2)
    assert [s.request_id for s in engine.running] == ["a2"]
    run_until_idle(engine, start=end2)
    assert sink.times["b1"][0] > sink.times["a2"][-1]
    assert engine.lora.resident() == ["b"] and engine.stats.lora_loads_total == 2


def test_mixed_adapter_batches_pay_per_extra_adapter() -> None:
    lora = {
        "adapters": ["a", "b", "c"],
        "max_loras": 4,
        "load_ms": 0.0,
        "step_overhead_ms": 0.0,
        "mixed_batch_ms_per_adapter": 2.0,
    }
    engine, sink = make_engine(lora=lora), Collector()
    for name in ("a", "b", "c"):
        submit(engine, sink, name, prompt=10, out=3, adapter=name)
    plan = engine.plan_step(0)
    assert plan is not None
    base = engine.step_cost.step_s([(c, n) for _, c, n in plan.batch])[0]
    assert plan.cost_s - base == pytest.approx(0.004, abs=1e-6)  # 3 adapters: 2 extra


def test_paused_sequences_hold_their_place_but_do_not_run() -> None:
    engine, sink = make_engine(), Collector()
    seq = submit(engine, sink, "s", prompt=10, out=6)
    seq.pause_after_tokens, seq.pause_ns = 2, 500_000_000
    run_until_idle(engine)
    assert len(sink.times["s"]) == 2  # stalled after two tokens
    end = engine.simulate_step(sink.times["s"][-1] + 600_000_000)
    assert end is not None
    run_until_idle(engine, start=end)
    times = sink.times["s"]
    assert len(times) == 6 and times[2] - times[1] >= 500_000_000


def test_abort_frees_blocks() -> None:
    engine, sink = make_engine(), Collector()
    seq = submit(engine, sink, "x", prompt=500, out=50)
    engine.simulate_step(0)
    assert engine.pool.used_blocks > 0
    engine.abort(seq)
    assert engine.pool.used_blocks == 0 and not engine.running
    assert engine.simulate_step(10**9) is None


def test_a_pd_decode_sequence_computes_only_its_prompts_last_token() -> None:
    engine, sink = make_engine(), Collector()
    seq = Sequence(request_id="d", prompt_tokens=4000, target_output=3, max_tokens=3,
                   sink=sink, arrival_ns=0, remote_kv_tokens=3999)
    engine.submit(seq)
    plan = engine.plan_step(0)
    assert plan is not None
    assert [(s.request_id, context, new) for s, context, new in plan.batch] == [("d", 3999, 1)]
    assert plan.cost_s == pytest.approx(engine.step_cost.decode_s(1, 3999), rel=0.05)
    assert plan.cost_s < engine.step_cost.prefill_s(4000) / 5
    engine.finish_step(plan)
    assert len(sink.times["d"]) == 1  # token 1 at the first step's end
    assert seq.num_cached == 0  # transferred KV is not a prefix-cache hit
    assert engine.stats.prefix_cache_hits_total == 0
    run_until_idle(engine, plan.end_ns)
    assert "d" in sink.finished
    assert engine.pool.free_blocks == engine.pool.num_blocks
