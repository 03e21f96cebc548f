"""The conversation and shared-prefix kinds in real `zerohop run`s against the embedded
target: sessions in order with their history and think times, prompts of their size."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.main_job.test_run_command import zerohop
from zerohop.workloads.inputs import load_workloads
from zerohop.workloads.kind_planner import make_workload_planner
from zerohop.workloads.planners.worker_load import worker_setup

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SEED = 7


def _run(tmp_path: Path, workload: Path, duration: str = "10s", *extra: str,
         all_ok: bool = True) -> pd.DataFrame:
    res = zerohop("run", "--workload", str(workload), "--duration", duration, "--seed",
                  str(SEED), "--telemetry", "none", "--microbench", "off", "--no-report",
                  "--results-dir", str(tmp_path / "r"), *extra)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stdout + res.stderr
    (run,) = [p for p in (tmp_path / "r").iterdir() if p.is_dir()]
    frame = pd.read_parquet(run / "requests.parquet")
    if all_ok:
        assert (frame.outcome == "ok").all(), frame.outcome.value_counts()
    return frame


def _synthetic_conversation(path: Path, name: str, *, turns: int, user_tokens: int,
                            answer_tokens: int, think_time_s: float, load: str) -> Path:
    """Writes a conversation workload of synthetic sessions with a constant think time."""
    path.write_text(f"""
kind: conversation
name: {name}
source: {{type: synthetic, turns: {turns}, user_tokens: {user_tokens}, \
answer_tokens: {answer_tokens}}}
think_time_s: {think_time_s}
think_time: constant
load: {load}
""")
    return path


def _planned_sessions(workload: Path, *, open_loop: bool, count: int = 400) -> dict[str, Any]:
    """The run's sessions as its planner drew them (the same seed: the same turns and
    think times, whatever the target answered)."""
    (spec,) = load_workloads([workload])
    planner: Any = make_workload_planner(
        spec, worker_setup(spec, seed=SEED, worker_index=0, worker_count=1))
    sessions = planner.schedule(60.0) if open_loop else (
        planner.next_session() for _ in range(count))
    return {s.session_id: s for s in sessions}


def _check_sessions(frame: pd.DataFrame, planned: dict[str, Any]) -> int:
    """Every session's turns in order, each sent after the previous answer's end plus
    its think time, with its history in its prompt; returns the sessions that had a
    second turn."""
    multi = 0
    for session_id, turns in frame.groupby("session_id"):
        turns = turns.sort_values("turn")
        plan = planned[str(session_id)]
        assert list(turns.turn) == list(range(1, len(turns) + 1)), session_id
        assert len(turns) <= len(plan.turns)
        assert turns.sent_ts.is_monotonic_increasing
        assert turns.input_tokens.is_monotonic_increasing and turns.input_tokens.is_unique
        assert list(turns.max_tokens) == [t.max_tokens for t in plan.turns[: len(turns)]]
        rows = turns.to_dict("records")
        for before, after in itertools.pairwise(rows):
            think = plan.turns[int(after["turn"]) - 1].think_time_s
            waited = after["sent_ts"] - before["end_ts"]
            assert think - 0.002 <= waited <= think + 1.0, (session_id, after["turn"], think,
                                                            waited)
            # the history: the previous prompt, its answer and the new message
            grown = after["input_tokens"] - before["input_tokens"] - before["output_tokens"]
            user = plan.turns[int(after["turn"]) - 1].user_tokens
            assert user <= grown <= user + 12, (session_id, grown, user)
        multi += len(turns) > 1
    return multi


def test_a_conversation_run_sends_each_sessions_turns_with_their_history(
        tmp_path: Path) -> None:
    workload = REPO / "workloads" / "conversation.yaml"
    frame = _run(tmp_path, workload)
    assert set(frame.workload) == {"conversation"}
    assert frame.session_id.notna().all() and frame.turn.notna().all()
    assert frame.turn.max() >= 3
    assert _check_sessions(frame, _planned_sessions(workload, open_loop=False)) >= 8
    # turn k's prompt holds the history: it grows with k
    by_turn = frame.groupby("turn").input_tokens.median()
    assert by_turn.is_monotonic_increasing and by_turn.iloc[-1] > 3 * by_turn.iloc[0]
    sized = (frame.input_tokens - frame.target_input_tokens).abs()
    assert (sized <= 2).mean() >= 0.95, sized.describe()


def test_open_loop_sessions_start_on_the_clock_and_go_on_at_their_own_pace(
        tmp_path: Path) -> None:
    workload = _synthetic_conversation(
        tmp_path / "open.yaml", "arrivals", turns=3, user_tokens=40, answer_tokens=16,
        think_time_s=0.3, load="{kind: open, rate_rps: 3, max_in_flight: 16}")
    frame = _run(tmp_path, workload, "8s")
    planned = _planned_sessions(workload, open_loop=True)
    assert _check_sessions(frame, planned) >= 10
    first = frame[frame.turn == 1]
    assert first.schedule_lag_ms.notna().all()  # due at its arrival
    assert frame[frame.turn > 1].schedule_lag_ms.isna().all()  # after its own think time
    # the arrivals keep their planned spacing: scheduled time minus offset is one start
    starts = first.scheduled_ts - [planned[s].scheduled_offset_s for s in first.session_id]
    assert starts.max() - starts.min() < 0.01


def test_a_failed_turn_ends_its_session(tmp_path: Path) -> None:
    faults = tmp_path / "faults.yaml"
    faults.write_text("faults:\n  http_500: {probability: 0.15}\n")
    workload = _synthetic_conversation(
        tmp_path / "flaky.yaml", "flaky", turns=5, user_tokens=32, answer_tokens=8,
        think_time_s=0.05, load="{kind: closed, users: 4}")
    frame = _run(tmp_path, workload, "6s", "--sim-args", f"--config {faults}", all_ok=False)
    failed_at = []
    for session_id, turns in frame.groupby("session_id"):
        outcomes = list(turns.sort_values("turn").outcome)
        assert list(turns.sort_values("turn").turn) == list(range(1, len(outcomes) + 1))
        assert all(o == "ok" for o in outcomes[:-1]), (session_id, outcomes)  # none after
        if outcomes[-1] != "ok":
            failed_at.append(len(outcomes))
    assert len(failed_at) >= 10 and set(failed_at) & {1, 2, 3, 4}  # ended early
    assert (frame.outcome == "ok").sum() > len(failed_at)


def test_a_shared_prefix_run_sends_prompts_of_the_asked_size(tmp_path: Path) -> None:
    frame = _run(tmp_path, REPO / "workloads" / "shared_prefix.yaml", "8s")
    assert set(frame.workload) == {"shared_prefix"}
    assert len(frame) >= 30
    # a 512-token system prompt and a 16-64-token question, with their template
    assert frame.target_input_tokens.between(512 + 16, 512 + 64 + 16).all()
    assert ((frame.input_tokens - frame.target_input_tokens).abs() <= 2).all()
    assert frame.session_id.isna().all()


def test_unique_prefixes_miss_the_cache_that_shared_ones_hit(tmp_path: Path) -> None:
    """Where the target reports its prefix cache (`cached_tokens`): the pool's prompts
    are served from it, the salted ones never (not past the salt's first block)."""
    workload = tmp_path / "both.yaml"
    workload.write_text("""
workloads:
  - {kind: shared_prefix, name: warm, prefixes: {count: 4, tokens: 512},
     load: {kind: closed, users: 2}}
  - {kind: shared_prefix, name: cold, prefixes: {count: 4, tokens: 512},
     prefix_mode: unique, load: {kind: closed, users: 2}}
""")
    frame = _run(tmp_path, workload, "6s")
    if frame.cached_tokens.isna().all():
        pytest.skip("the embedded target reports no cached_tokens")
    warm, cold = (frame[frame.workload == name] for name in ("warm", "cold"))
    assert len(warm) >= 10 and len(cold) >= 10
    assert warm.cached_tokens.median() >= 256
    assert cold.cached_tokens.max() < 16  # not even one block of a 512-token prompt
