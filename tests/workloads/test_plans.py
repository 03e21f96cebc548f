"""Request plans: per-worker seeds, sizes, adapters, schedules and trace replay."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np
import pytest

from tests.workloads.conftest import trace_path
from zerohop.sim.answers import tokens as sim_tokens
from zerohop.workloads.content.prompts import PromptBuilder, TokenCalibration
from zerohop.workloads.content.word_counts import WordCounts
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.planners.request_plans import (
    PlannedRequest,
    make_planner,
    zipf_probabilities,
)
from zerohop.workloads.timing.traces import TraceRequest, read_trace
from zerohop.workloads.yaml_io import parse_workloads

pytestmark = pytest.mark.unit


def _spec(data: dict[str, Any]) -> Any:
    return parse_workloads(data).workloads[0]


FLOOD = {"kind": "short_query_flood", "name": "flood",
         "input_tokens": {"type": "uniform", "min": 20, "max": 400}, "max_tokens": 16}
OPEN_FLOOD = {**FLOOD, "load": {"kind": "open", "rate_rps": 40,
                                "arrival": {"type": "gamma", "cv": 2.0}}}


def _scheduled(planner: Any, duration_s: float | None = None) -> list[Any]:
    """The planner's schedule as a list (typed loosely: tests read optional fields)."""
    return list(planner.schedule(duration_s))


def _texts(planner: Any, n: int) -> list[str | None]:
    return [planner.next_request().prompt for _ in range(n)]


def test_workers_get_different_but_reproducible_streams() -> None:
    spec = _spec(FLOOD)
    w0 = _texts(make_planner(spec, seed=1, worker_index=0, worker_count=2), 20)
    w0_again = _texts(make_planner(spec, seed=1, worker_index=0, worker_count=2), 20)
    w1 = _texts(make_planner(spec, seed=1, worker_index=1, worker_count=2), 20)
    other_seed = _texts(make_planner(spec, seed=2, worker_index=0, worker_count=2), 20)
    assert w0 == w0_again
    assert not set(w0) & set(w1)
    assert not set(w0) & set(other_seed)


def test_the_specs_own_seed_wins_and_workload_names_separate_streams() -> None:
    seeded = _spec({**FLOOD, "seed": 5})
    a = _texts(make_planner(seeded, seed=1, worker_index=0, worker_count=1), 3)
    b = _texts(make_planner(seeded, seed=2, worker_index=0, worker_count=1), 3)
    assert a == b
    renamed = _spec({**FLOOD, "name": "other"})
    c = _texts(make_planner(renamed, seed=1, worker_index=0, worker_count=1), 3)
    d = _texts(make_planner(_spec(FLOOD), seed=1, worker_index=0, worker_count=1), 3)
    assert c != d


def test_closed_loop_requests_are_sized_as_planned() -> None:
    planner = make_planner(_spec(FLOOD), seed=3, worker_index=0, worker_count=1)
    requests = [planner.next_request() for _ in range(200)]
    for request in requests:
        assert isinstance(request, PlannedRequest)
        assert 20 <= request.target_input_tokens <= 400
        assert request.max_tokens == 16 and request.ignore_eos and request.temperature == 0
        assert request.api == "openai-chat" and request.model is None
        assert request.scheduled_offset_s is None and request.trace_row is None
        counted = sim_tokens.count_chat_tokens(request.messages)
        assert abs(counted - request.target_input_tokens) <= max(1, 0.03 * counted)
    assert [r.sequence for r in requests[:3]] == [0, 1, 2]
    sizes = [r.target_input_tokens for r in requests]
    assert np.mean(sizes) == pytest.approx(210, rel=0.15)


def test_long_context_documents_and_summaries() -> None:
    spec = _spec({"kind": "long_context", "name": "docs",
                  "document_tokens": {"type": "uniform", "min": 8192, "max": 16384},
                  "summary_tokens": 64, "api": "openai-completions"})
    planner = make_planner(spec, seed=0, worker_index=0, worker_count=1)
    for _ in range(3):
        request = planner.next_request()
        assert 8192 <= request.target_input_tokens <= 16384 and request.max_tokens == 64
        counted = sim_tokens.count_prompt_tokens(request.prompt)
        assert abs(counted - request.target_input_tokens) <= 0.03 * counted


def test_token_id_prompts_are_exact() -> None:
    spec = _spec({**FLOOD, "api": "openai-completions", "prompt_format": "token_ids",
                  "token_id_vocab_size": 50000})
    request = make_planner(spec, seed=0, worker_index=0, worker_count=1).next_request()
    assert request.prompt is None and request.messages is None
    assert request.token_ids is not None
    assert len(request.token_ids) == request.target_input_tokens
    assert max(request.token_ids) < 50000


def test_a_server_calibration_is_used() -> None:
    calibration = TokenCalibration(a=2.0, b=10.0)
    planner = make_planner(_spec({**FLOOD, "input_tokens": 210}), seed=0, worker_index=0,
                           worker_count=1, calibration=calibration)
    request: Any = planner.next_request()
    assert len(request.prompt.split()) == 100  # (210 - 10) / 2 words


def test_a_size_below_the_smallest_prompt_is_clamped_flagged_and_said_once(
        caplog: pytest.LogCaptureFixture) -> None:
    calibration = TokenCalibration(a=2.0, b=10.0)  # one word and the framing: 12 tokens
    assert calibration.smallest_prompt_tokens() == 12
    spec = _spec({**FLOOD, "input_tokens": {"type": "uniform", "min": 1, "max": 30}})
    planner = make_planner(spec, seed=0, worker_index=0, worker_count=1,
                           calibration=calibration)
    with caplog.at_level("WARNING", logger="zerohop"):
        requests: list[Any] = [planner.next_request() for _ in range(200)]
    below = [r for r in requests if r.target_input_tokens < 12]
    assert below and all(r.prompt_clamped and len(r.prompt.split()) == 1 for r in below)
    assert not any(r.prompt_clamped for r in requests if r.target_input_tokens >= 12)
    said = [m for m in caplog.messages if "prompt_clamped=true" in m]
    assert len(said) == 1 and "'flood'" in said[0] and "12" in said[0], caplog.messages


def test_a_size_the_word_table_cannot_make_is_the_nearest_below_and_flagged() -> None:
    # every word after the first counts 2 tokens, the smallest request 5: 6 cannot be made
    words = WordCounts(spaced=np.full(4096, 2), spaced_stop=np.full(4096, 3),
                       opening={0: 5, 1: 5}, stop_every=12)
    calibration = TokenCalibration(a=2.0, b=3.0, words=words)
    for asked, clamped, sent_words in ((6, True, 1), (7, False, 2), (9, False, 3)):
        spec = _spec({**FLOOD, "input_tokens": asked})
        request: Any = make_planner(spec, seed=0, worker_index=0, worker_count=1,
                                    calibration=calibration).next_request()
        assert request.prompt_clamped is clamped, asked
        assert len(request.prompt.split()) == sent_words, asked


def test_token_id_prompts_are_never_clamped() -> None:
    spec = _spec({**FLOOD, "input_tokens": 1, "api": "openai-completions",
                  "prompt_format": "token_ids"})
    request = make_planner(spec, seed=0, worker_index=0, worker_count=1).next_request()
    assert request.prompt_clamped is None and request.token_ids is not None


def test_lora_adapters_follow_zipf_popularity() -> None:
    spec = _spec({"kind": "lora_mix", "name": "lora", "adapters": {"count": 10},
                  "zipf_s": 1.2, "base_model_share": 0.1, "input_tokens": 8})
    planner = make_planner(spec, seed=4, worker_index=0, worker_count=1)
    draws = [planner.next_request() for _ in range(20_000)]
    counts = Counter(r.adapter for r in draws)
    assert counts[None] / len(draws) == pytest.approx(0.1, abs=0.01)
    expected = zipf_probabilities(10, 1.2) * 0.9
    observed = np.array([counts[f"lora-{i}"] for i in range(10)]) / len(draws)
    assert np.abs(observed - expected).max() < 0.012
    assert all(r.model == r.adapter for r in draws if r.adapter is not None)
    assert observed[0] > observed[1] > observed[4] > observed[9]


def test_zipf_probabilities() -> None:
    p = zipf_probabilities(4, 1.0)
    assert p.sum() == pytest.approx(1.0)
    assert p.tolist() == pytest.approx(np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    assert zipf_probabilities(5, 0.0).tolist() == pytest.approx([0.2] * 5)


def test_open_loop_schedule_is_split_across_workers_exactly() -> None:
    spec = _spec(OPEN_FLOOD)
    single = _scheduled(make_planner(spec, seed=8, worker_index=0, worker_count=1), 60)
    shares = [_scheduled(make_planner(spec, seed=8, worker_index=i, worker_count=3), 60)
              for i in range(3)]
    single_times = [r.scheduled_offset_s for r in single]
    union = sorted(r.scheduled_offset_s for share in shares for r in share)
    assert union == single_times
    assert len(single) / 60 == pytest.approx(40, rel=0.15)
    gaps = np.diff(single_times)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.15)
    # contents differ between workers even where their arrival counts match
    assert shares[0][0].prompt != shares[1][0].prompt
    assert all(r.worker_index == 1 for r in shares[1])


def test_open_loop_schedule_without_a_duration_is_endless() -> None:
    planner = make_planner(_spec(OPEN_FLOOD), seed=1, worker_index=0, worker_count=1)
    taken: list[Any] = list(itertools.islice(planner.schedule(), 10_000))
    assert len(taken) == 10_000
    offsets = [r.scheduled_offset_s for r in taken]
    assert offsets == sorted(offsets)


def test_closed_loop_has_no_schedule_and_splits_users() -> None:
    spec = _spec({**FLOOD, "load": {"kind": "closed", "users": 5, "think_time_s": 2,
                                    "think_time": "exponential"}})
    planners = [make_planner(spec, seed=0, worker_index=i, worker_count=2) for i in range(2)]
    assert [p.users for p in planners] == [3, 2]
    with pytest.raises(ValueError, match="closed-loop"):
        next(planners[0].schedule())
    pauses = [planners[0].think_time_s() for _ in range(4000)]
    assert np.mean(pauses) == pytest.approx(2.0, rel=0.06)
    constant = _spec({**FLOOD, "load": {"kind": "closed", "think_time_s": 0.5}})
    assert make_planner(constant, seed=0, worker_index=0, worker_count=1).think_time_s() == 0.5


def test_in_flight_cap_is_shared_across_workers() -> None:
    spec = _spec({**FLOOD, "load": {"kind": "open", "rate_rps": 5, "max_in_flight": 5}})
    caps = [make_planner(spec, seed=0, worker_index=i, worker_count=2).in_flight_cap()
            for i in range(2)]
    assert caps == [3, 2]
    uncapped = make_planner(_spec(OPEN_FLOOD), seed=0, worker_index=0, worker_count=2)
    assert uncapped.in_flight_cap() is None


def test_bad_worker_position() -> None:
    with pytest.raises(ValueError, match="outside"):
        make_planner(_spec(FLOOD), seed=0, worker_index=2, worker_count=2)


# --- trace replay ---------------------------------------------------------------------------
def test_azure_conv_at_10x_for_60s_keeps_the_per_second_arrival_counts() -> None:
    path = trace_path("AzureLLMInferenceTrace_conv.csv")
    spec = _spec({"kind": "trace_replay", "name": "azure", "trace": str(path), "speed": 10,
                  "duration_s": 60})
    trace = read_trace(path)
    schedule: list[Any] = [r for i in range(2)
                for r in make_planner(spec, seed=0, worker_index=i, worker_count=2,
                                      trace_requests=trace).schedule()]
    offsets = np.array([r.scheduled_offset_s for r in schedule])
    assert offsets.min() >= 0 and offsets.max() < 60
    generated = np.bincount(offsets.astype(int), minlength=60)[:60]
    own = np.array([r.offset_s for r in trace if r.offset_s is not None and r.offset_s < 600])
    expected = np.bincount((own / 10).astype(int), minlength=60)[:60]
    assert generated.sum() == expected.sum() == len(own)
    assert np.corrcoef(generated, expected)[0, 1] >= 0.95
    assert generated.std() > 0.1 * generated.mean()  # the trace is bursty: not flat
    rows = sorted(r.trace_row for r in schedule)
    assert rows == list(range(len(own)))  # every trace row once, none twice


def test_trace_lengths_are_scaled_and_capped() -> None:
    path = trace_path("AzureLLMInferenceTrace_conv.csv")
    spec = _spec({"kind": "trace_replay", "name": "azure", "trace": str(path),
                  "max_requests": 50,
                  "scale_tokens": {"input_multiplier": 0.5, "max_output_tokens": 20}})
    trace = read_trace(path)
    planned = _scheduled(make_planner(spec, seed=0, worker_index=0, worker_count=1,
                                trace_requests=trace))
    assert len(planned) == 50
    for request in planned:
        row = trace[request.trace_row]
        assert request.target_input_tokens == max(1, round(row.input_tokens * 0.5))
        assert request.max_tokens == max(1, min(row.output_tokens, 20))


def test_trace_schedule_stops_at_the_duration() -> None:
    rows = [TraceRequest(float(t), 10, 5, row=t) for t in range(100)]
    spec = _spec({"kind": "trace_replay", "name": "t",
                  "trace": str(trace_path("AzureLLMInferenceTrace_conv.csv"))})
    planner = make_planner(spec, seed=0, worker_index=0, worker_count=1, trace_requests=rows)
    assert [r.scheduled_offset_s for r in planner.schedule(5.0)] == [0, 1, 2, 3, 4]


def test_closed_loop_trace_workers_cycle_through_disjoint_rows() -> None:
    rows = [TraceRequest(None, 10 + i, None, row=i) for i in range(7)]
    spec = _spec({"kind": "trace_replay", "name": "share",
                  "trace": str(trace_path("ShareGPT_V3_filtered_500.json")),
                  "load": {"kind": "closed", "users": 2}, "max_tokens": 9})
    planners = [make_planner(spec, seed=0, worker_index=i, worker_count=2, trace_requests=rows)
                for i in range(2)]
    seen = [[p.next_request().trace_row for _ in range(4)] for p in planners]
    assert seen == [[0, 2, 4, 6], [1, 3, 5, 0]]
    request = planners[0].next_request()
    assert request.max_tokens == 9  # no output length in the trace: the spec's


def test_sharegpt_with_poisson_arrivals() -> None:
    path = trace_path("ShareGPT_V3_filtered_500.json")
    spec = _spec({"kind": "trace_replay", "name": "share", "trace": str(path),
                  "load": {"kind": "open", "rate_rps": 20}})
    planned = _scheduled(make_planner(spec, seed=0, worker_index=0, worker_count=1), 30)
    assert len(planned) / 30 == pytest.approx(20, rel=0.2)
    trace = read_trace(path)
    assert [r.trace_row for r in planned[:5]] == [0, 1, 2, 3, 4]
    assert planned[3].target_input_tokens == trace[3].input_tokens
    assert all(r.max_tokens == 128 for r in planned)


def test_mooncake_prefix_blocks_become_shared_prompt_prefixes() -> None:
    rows = [
        TraceRequest(0.0, 1200, 5, prefix_group=0, row=0, hash_ids=(0, 1, 2)),
        TraceRequest(0.5, 1100, 5, prefix_group=0, row=1, hash_ids=(0, 1, 3)),
        TraceRequest(1.0, 700, 5, prefix_group=9, row=2, hash_ids=(9, 10)),
    ]
    spec = _spec({"kind": "trace_replay", "name": "moon",
                  "trace": str(trace_path("conversation_trace.jsonl")),
                  "use_prefix_blocks": True, "api": "openai-completions"})
    planned = _scheduled(make_planner(spec, seed=0, worker_index=0, worker_count=1,
                                trace_requests=rows))
    words = [r.prompt.split() for r in planned]
    shared = 2 * round(512 / (13 / 12))  # two 512-token blocks, in words
    assert words[0][:shared] == words[1][:shared]
    assert words[0][shared + 5] != words[1][shared + 5]
    assert words[0][:10] != words[2][:10]
    for request in planned:
        counted = sim_tokens.count_prompt_tokens(request.prompt)
        assert abs(counted - request.target_input_tokens) <= 0.03 * counted
    assert [r.prefix_group for r in planned] == [0, 0, 9]


def test_an_empty_trace_window_is_a_workload_error() -> None:
    rows = [TraceRequest(0.0, 1, 1)]
    spec = _spec({"kind": "trace_replay", "name": "late", "start_offset_s": 100,
                  "trace": str(trace_path("AzureLLMInferenceTrace_conv.csv"))})
    with pytest.raises(WorkloadError, match="no trace requests in the window"):
        make_planner(spec, seed=0, worker_index=0, worker_count=1, trace_requests=rows)


class _WordyBuilder(PromptBuilder):
    """A builder that draws more from its generator than the default one does."""

    def build_for_tokens(self, target_tokens: int, rng: np.random.Generator,
                         calibration: TokenCalibration) -> str:
        rng.random(7)
        return super().build_for_tokens(target_tokens, rng, calibration)


def test_a_seeds_sizes_do_not_depend_on_how_prompts_draw_their_words() -> None:
    spec = _spec(OPEN_FLOOD)

    def sizes(**builder: Any) -> list[tuple[int, int, float | None]]:
        planner = make_planner(spec, seed=3, worker_index=0, worker_count=1, **builder)
        return [(r.target_input_tokens, r.max_tokens, r.scheduled_offset_s)
                for r in planner.schedule(5.0)]

    plain, wordy = sizes(), sizes(builder=_WordyBuilder())
    assert len(plain) > 100
    assert plain == wordy
