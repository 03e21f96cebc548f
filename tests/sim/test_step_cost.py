"""The engine prices every step with the step-cost model it is given (the profile's
roofline when none is), so planning can run the same scheduler on a fitted cost."""

from __future__ import annotations

import pytest

from zerohop.planning.calibrate import CostParams, LinearStepCost
from zerohop.sim.config import ServedModelConfig
from zerohop.sim.cost_model.profiles import Roofline
from zerohop.sim.cost_model.step_cost import Chunk, StepCostModel
from zerohop.sim.engine.engine import Engine
from zerohop.sim.sequence import NULL_SINK, Sequence

pytestmark = pytest.mark.unit

SERVED = ServedModelConfig(gpu="h100-sxm", model="llama-3-8b")


class Scaled(StepCostModel):
    """Another model's cost times `factor`."""

    def __init__(self, inner: StepCostModel, factor: float) -> None:
        self.inner = inner
        self.factor = factor

    def batch_s(
        self, decodes: int, decode_context: int, chunks: list[Chunk]
    ) -> tuple[float, float, float]:
        step, compute, memory = self.inner.batch_s(decodes, decode_context, chunks)
        return step * self.factor, compute * self.factor, memory * self.factor


def first_token_ns(engine: Engine, prompt: int) -> int:
    """A lone request's time to first token: its whole prefill, run offline."""
    seq = Sequence(request_id="r", prompt_tokens=prompt, target_output=3, max_tokens=3,
                   sink=NULL_SINK, arrival_ns=0)
    engine.submit(seq)
    now = 0
    while (end := engine.simulate_step(now)) is not None:
        now = end
    assert seq.first_token_ns is not None
    return seq.first_token_ns


def test_without_a_model_the_engine_uses_the_profiles_roofline() -> None:
    engine = Engine(SERVED)
    assert isinstance(engine.step_cost, Roofline)
    assert first_token_ns(engine, 2000) / 1e9 == pytest.approx(
        engine.step_cost.prefill_s(2000), rel=1e-6)


def test_a_model_twice_as_costly_doubles_the_prefill_time() -> None:
    roofline = Engine(SERVED).step_cost
    base = first_token_ns(Engine(SERVED, step_cost=roofline), 2000)
    doubled = first_token_ns(Engine(SERVED, step_cost=Scaled(roofline, 2.0)), 2000)
    assert doubled == pytest.approx(2 * base, rel=1e-6)


def test_the_models_compute_share_reaches_the_step_plan() -> None:
    """The modelled GPU gauges read the step's compute time from the same model."""
    roofline = Engine(SERVED).step_cost
    engine = Engine(SERVED, step_cost=Scaled(roofline, 3.0))
    engine.submit(Sequence(request_id="r", prompt_tokens=500, target_output=1, max_tokens=1,
                           sink=NULL_SINK, arrival_ns=0))
    plan = engine.plan_step(0)
    assert plan is not None
    step, compute, _memory = roofline.step_s([(0, 500)])
    assert (plan.cost_s, plan.compute_s) == pytest.approx((3 * step, 3 * compute), rel=1e-9)


def test_summed_decodes_price_a_step_as_listing_them_does() -> None:
    """The scheduler sums its decodes' contexts (`batch_s`) instead of listing them:
    both cost models' compute and memory terms are sums over the sequences, a decode's
    linear in its context, so one decode at a time adds up to the summed price."""
    params = CostParams(overhead_ms=8.0, prefill_us_per_token=120.0, decode_ms_per_seq=1.5,
                        context_us_per_token=0.4)
    decodes = [130, 4000, 17, 999]
    others = [(0, 512), (256, 64), (0, 1)]
    for model in (Engine(SERVED).step_cost, LinearStepCost(params, 1.0)):
        empty = model.batch_s(0, 0, [])
        summed = model.batch_s(len(decodes), sum(decodes), others)
        one_by_one = [model.batch_s(1, c, []) for c in decodes]
        one_by_one += [model.batch_s(0, 0, [chunk]) for chunk in others]
        for term in (1, 2):  # compute, memory
            added = empty[term] + sum(cost[term] - empty[term] for cost in one_by_one)
            assert summed[term] == pytest.approx(added, rel=1e-12)
        listed = [(c, 1) for c in decodes] + others
        assert model.step_s(listed) == pytest.approx(summed, rel=1e-12)


def test_the_scheduler_prices_its_step_from_every_sequence_it_runs() -> None:
    """A step mixing decodes (some needing a new block), a prefill and a new admission
    costs what the model gives for its sequences listed one by one."""
    engine = Engine(SERVED)
    seqs = [Sequence(request_id=f"r{i}", prompt_tokens=prompt, target_output=40,
                     max_tokens=40, sink=NULL_SINK, arrival_ns=0)
            for i, prompt in enumerate((15, 16, 300, 31))]
    for seq in seqs:
        engine.submit(seq)
    now = engine.simulate_step(0)  # the prefills
    assert now is not None and seqs[1].blocks == 1  # its 16 tokens fill one block
    engine.submit(Sequence(request_id="late", prompt_tokens=700, target_output=2,
                           max_tokens=2, sink=NULL_SINK, arrival_ns=now))
    plan = engine.plan_step(now)
    assert plan is not None
    listed = [(context, new) for _, context, new in plan.batch]
    assert sum(1 for c, n in listed if n == 1 and c > 0) == 4
    assert seqs[1].blocks == 2  # its decode took the scheduler's other path
    assert plan.cost_s == pytest.approx(engine.step_cost.step_s(listed)[0], rel=1e-12)
