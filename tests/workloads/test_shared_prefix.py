"""Shared-prefix plans: the pool, its popularity, and the cache-cold control."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from zerohop.sim.answers import tokens as sim_tokens
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.kind_planner import make_workload_planner
from zerohop.workloads.planners.request_plans import zipf_probabilities
from zerohop.workloads.planners.shared_prefix import SALT_UNITS
from zerohop.workloads.planners.worker_load import worker_setup
from zerohop.workloads.yaml_io import parse_workloads

pytestmark = pytest.mark.unit

POOL = {"kind": "shared_prefix", "name": "pool",
        "prefixes": {"count": 6, "tokens": {"type": "uniform", "min": 64, "max": 256},
                     "popularity": "zipf", "zipf_s": 1.2},
        "question_tokens": {"type": "uniform", "min": 16, "max": 40}, "max_tokens": 8}


def _planner(data: dict[str, Any] = POOL, *, worker_index: int = 0, worker_count: int = 1,
             api: Any = "openai-chat") -> Any:
    spec = parse_workloads(data).workloads[0]
    return make_workload_planner(spec, worker_setup(
        spec, seed=3, worker_index=worker_index, worker_count=worker_count, default_api=api))


def _requests(planner: Any, n: int) -> list[Any]:
    return [planner.next_request() for _ in range(n)]


def _system(request: Any) -> str:
    return str(request.messages[0]["content"])


@pytest.mark.parametrize("popularity, s", [("zipf", 1.2), ("zipf", 0.6), ("uniform", 1.2)])
def test_prompts_are_picked_by_their_popularity(popularity: str, s: float) -> None:
    data = {**POOL, "prefixes": {**POOL["prefixes"], "popularity": popularity, "zipf_s": s}}
    n = 6000
    counts = Counter(r.prefix_group for r in _requests(_planner(data), n))
    observed = np.array([counts[rank] for rank in range(6)]) / n
    expected = zipf_probabilities(6, s if popularity == "zipf" else 0.0)
    assert np.abs(observed - expected).max() < 0.02, (observed, expected)


def test_requests_share_their_prompt_and_nothing_after_it() -> None:
    requests = _requests(_planner(), 300)
    by_rank: dict[int, set[str]] = {}
    for r in requests:
        by_rank.setdefault(r.prefix_group, set()).add(_system(r))
        assert [m["role"] for m in r.messages] == ["system", "user"]
    assert all(len(texts) == 1 for texts in by_rank.values())  # one prompt per rank
    assert len({next(iter(t)) for t in by_rank.values()}) == len(by_rank)  # all distinct
    questions = [r.messages[1]["content"] for r in requests]
    assert len(set(questions)) == len(questions)


def test_the_pool_is_the_same_on_every_worker() -> None:
    pools = []
    for worker in range(2):
        planner = _planner(worker_index=worker, worker_count=2)
        pools.append({r.prefix_group: _system(r) for r in _requests(planner, 200)})
    shared = pools[0].keys() & pools[1].keys()
    assert len(shared) >= 4
    assert all(pools[0][rank] == pools[1][rank] for rank in shared)


def test_unique_mode_gives_no_two_equal_prefixes_at_the_same_sizes() -> None:
    shared = _requests(_planner(), 400)
    unique = _requests(_planner({**POOL, "prefix_mode": "unique"}), 400)
    systems = [_system(r) for r in unique]
    assert len(set(systems)) == len(systems)
    starts = [" ".join(s.split(" ")[:SALT_UNITS]) for s in systems]
    assert len(set(starts)) == len(starts)  # every prompt starts differently
    firsts = Counter(s.split(" ")[0] for s in systems)
    assert firsts.most_common(1)[0][1] < 20  # the salt starts random, not with a counter
    for a, b in zip(shared, unique, strict=True):  # the same plan, salted
        assert a.prefix_group == b.prefix_group
        assert a.target_input_tokens == b.target_input_tokens
        assert len(_system(a).split(" ")) == len(_system(b).split(" "))
        assert _system(a).split(" ")[SALT_UNITS:] == _system(b).split(" ")[SALT_UNITS:]


def test_requests_meet_their_asked_size_on_every_api() -> None:
    """Prompt and question are each sized to the word (so ±1 token each), and the
    system message's template is counted on the chat APIs."""
    errors = []
    for r in _requests(_planner(), 200):
        errors.append(sim_tokens.count_chat_tokens(r.messages) - r.target_input_tokens)
        assert 64 + 16 <= r.target_input_tokens - 4 <= 256 + 40
    for r in _requests(_planner(api="openai-completions"), 200):
        assert r.prompt == f"{_system(r)}\n\n{r.messages[1]['content']}"
        errors.append(sim_tokens.count_content_tokens(r.prompt) - r.target_input_tokens)
    assert max(map(abs, errors)) <= 2 and abs(np.mean(errors)) < 0.5, Counter(errors)


def test_a_pool_prompt_too_short_for_the_salt_and_token_ids_are_refused() -> None:
    with pytest.raises(WorkloadError, match=r"prefixes.tokens: .*>= 16 tokens"):
        parse_workloads({**POOL, "prefixes": {"count": 2, "tokens": 8}})
    with pytest.raises(WorkloadError, match="prompt_format: text"):
        parse_workloads({**POOL, "api": "openai-completions", "prompt_format": "token_ids"})
