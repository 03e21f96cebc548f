"""The modelled draft (sim.spec_decode): acceptance draws, the tokens a decode step
hands out, the verification's cost, and vLLM's counters on /metrics."""

from __future__ import annotations

import itertools

import pytest

from tests.sim.test_engine import Collector, make_engine, run_until_idle, submit
from zerohop.sim.cost_model.spec_decode import DraftModel, SpeculativeStepCost
from zerohop.sim.engine.histograms import LagRecorder
from zerohop.sim.serving.exposition import render_metrics

pytestmark = pytest.mark.unit


def test_acceptance_is_a_prefix_counted_per_position_and_seeded() -> None:
    draft = DraftModel(4, 0.7, seed=3)
    draws = [draft.verify() for _ in range(2000)]
    c = draft.counters
    assert c.drafts == 2000 and c.draft_tokens == 8000
    assert c.accepted_tokens == sum(draws)
    # position i is accepted exactly when the draft accepted more than i tokens
    assert c.accepted_per_pos == [sum(d > i for d in draws) for i in range(4)]
    again = DraftModel(4, 0.7, seed=3)
    assert [again.verify() for _ in range(50)] == draws[:50]  # the seed decides
    assert set(DraftModel(3, 1.0, 0).verify() for _ in range(20)) == {3}
    assert set(DraftModel(3, 0.0, 0).verify() for _ in range(20)) == {0}


def test_every_draft_accepted_emits_k_plus_one_tokens_per_decode_step() -> None:
    engine, sink = make_engine(spec_draft_tokens=3, spec_acceptance=1.0), Collector()
    submit(engine, sink, "a", prompt=500, out=22)
    run_until_idle(engine)
    times = sink.times["a"]
    assert len(times) == 22 and "a" in sink.finished
    # token 1 from the prefill, then 4 per decode step: 5 full steps and one of 1
    steps = [len(list(group)) for _, group in itertools.groupby(times)]
    assert steps == [1, 4, 4, 4, 4, 4, 1]
    assert engine.stats.generation_tokens_total == 22
    assert engine.draft is not None
    assert engine.draft.counters.drafts == 6
    assert engine.draft.counters.accepted_tokens == 18  # the last draw counts, untruncated
    assert engine.pool.free_blocks == engine.pool.num_blocks


def test_no_draft_without_the_option() -> None:
    engine, sink = make_engine(), Collector()
    submit(engine, sink, "a", prompt=500, out=10)
    run_until_idle(engine)
    assert engine.draft is None
    assert len(set(sink.times["a"])) == 10  # one token per step


def test_verifying_k_drafts_costs_about_one_decode_step_plus_the_drafts() -> None:
    plain = make_engine().step_cost
    spec = SpeculativeStepCost(plain, draft_tokens=4, draft_ms_per_token=0.05)
    one = plain.decode_s(32, 1000)
    verify = spec.decode_s(32, 1000)
    # the same as the inner model pricing each decode as 5 new tokens, plus 4 proposals
    chunks = [(1000, 5)] * 32
    assert verify == pytest.approx(plain.step_s(chunks)[0] + 4 * 0.05e-3)
    assert one < verify < 1.5 * one  # memory-bound decode: the drafts ride along
    assert spec.prefill_s(1000) == plain.prefill_s(1000)  # no decodes, no drafts


def test_uneven_contexts_are_priced_as_their_sum() -> None:
    plain = make_engine().step_cost
    spec = SpeculativeStepCost(plain, draft_tokens=2, draft_ms_per_token=0.0)
    exact = plain.step_s([(100, 3), (101, 3), (101, 3)])[0]
    assert spec.batch_s(3, 302, [])[0] == pytest.approx(exact)


def test_metrics_export_vllms_counters_only_with_a_draft() -> None:
    engine, sink = make_engine(spec_draft_tokens=2, spec_acceptance=0.5), Collector()
    submit(engine, sink, "a", prompt=200, out=40)
    run_until_idle(engine)
    assert engine.draft is not None
    c = engine.draft.counters
    text = render_metrics([engine], LagRecorder(), LagRecorder()).decode()
    label = f'model_name="{engine.name}"'
    assert f"vllm:spec_decode_num_drafts_total{{{label}}} {c.drafts}\n" in text
    assert f"vllm:spec_decode_num_draft_tokens_total{{{label}}} {c.draft_tokens}\n" in text
    assert f"vllm:spec_decode_num_accepted_tokens_total{{{label}}} {c.accepted_tokens}\n" in text
    for position, n in enumerate(c.accepted_per_pos):
        name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        assert f'{name}{{{label},position="{position}"}} {n}\n' in text
    plain = render_metrics([make_engine()], LagRecorder(), LagRecorder()).decode()
    assert "spec_decode" not in plain
