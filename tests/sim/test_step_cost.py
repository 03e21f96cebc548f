"""The engine prices every step with the step-cost model it is given (the profile's
roofline when none is), so planning can run the same scheduler on a fitted cost."""

from __future__ import annotations

import pytest

from zerohop.sim.config import ServedModelConfig
from zerohop.sim.engine import Engine
from zerohop.sim.profiles import Roofline
from zerohop.sim.sequence import NULL_SINK, Sequence
from zerohop.sim.step_cost import Chunk, StepCostModel

pytestmark = pytest.mark.unit

SERVED = ServedModelConfig(gpu="h100-sxm", model="llama-3-8b")


class Scaled(StepCostModel):
    """Another model's cost times `factor`."""

    def __init__(self, inner: StepCostModel, factor: float) -> None:
        self.inner = inner
        self.factor = factor

    def step_s(self, chunks: list[Chunk]) -> tuple[float, float, float]:
        step, compute, memory = self.inner.step_s(chunks)
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
