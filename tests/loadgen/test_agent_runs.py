"""The agent kind in real `zerohop run`s against the embedded target (which plays a
tool-calling model): loops of steps 1..k, a tool call on every step but the last, the
last an answer or the cap, each step after its tool's latency with a prompt grown by
the call and its result; and an API without tools refused before any load."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.main_job.test_run_command import assert_one_line_error, zerohop
from zerohop.workloads.inputs import load_workloads
from zerohop.workloads.kind_planner import make_workload_planner
from zerohop.workloads.planners.worker_load import worker_setup

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
AGENT_YAML = REPO / "workloads" / "agent.yaml"
SEED = 7
USERS = 4  # Locust users: loops at once


def _planned_loops(count: int = 400) -> dict[str, Any]:
    """The run's loops as its planner drew them (the same seed: the same steps' draws,
    whatever the target answered)."""
    (spec,) = load_workloads([AGENT_YAML])
    planner: Any = make_workload_planner(
        spec, worker_setup(spec, seed=SEED, worker_index=0, worker_count=1))
    loops = (planner.next_session() for _ in range(count))
    return {loop.session_id: loop for loop in loops}


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_agent_loops_call_tools_until_an_answer_or_the_cap(api: str, tmp_path: Path) -> None:
    res = zerohop("run", "--workload", str(AGENT_YAML), "--only", "Agent", "--api", api,
                  "--users", str(USERS), "--duration", "10s", "--seed", str(SEED),
                  "--telemetry", "none",
                  "--microbench", "off", "--no-report", "--results-dir", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stdout + res.stderr
    (run,) = [p for p in (tmp_path / "r").iterdir() if p.is_dir()]
    frame = pd.read_parquet(run / "requests.parquet")
    assert set(frame.workload) == {"agent"} and set(frame.api) == {api}
    assert (frame.outcome == "ok").all(), frame.outcome.value_counts()
    assert frame.session_id.notna().all() and frame.turn.isna().all()
    planned = _planned_loops()
    max_steps = next(iter(planned.values())).planner.spec.max_steps
    ends: dict[str, int] = {"answer": 0, "cap": 0, "cut": 0}
    for loop_id, steps in frame.groupby("session_id"):
        steps = steps.sort_values("agent_step")
        k = len(steps)
        assert list(steps.agent_step) == list(range(1, k + 1)), loop_id
        assert k <= max_steps
        assert (steps.tool_calls.iloc[:-1] == 1).all(), (loop_id, list(steps.tool_calls))
        assert steps.agent_end.iloc[:-1].isna().all()
        last = steps.iloc[-1]
        if last.agent_end == "answer":
            assert last.tool_calls == 0
        elif last.agent_end == "cap":
            assert k == max_steps and last.tool_calls == 1
        else:  # still calling tools when the run ended
            assert pd.isna(last.agent_end) and last.tool_calls == 1 and k < max_steps
        ends["cut" if pd.isna(last.agent_end) else str(last.agent_end)] += 1
        # each step after the previous answer plus its mocked tool's latency, its prompt
        # grown by the call and the result
        plan = planned[str(loop_id)]
        rows = steps.to_dict("records")
        for before, after in itertools.pairwise(rows):
            latency = plan.steps_plan[int(before["agent_step"]) - 1].tool_latency_s
            waited = after["sent_ts"] - before["end_ts"]
            assert latency - 0.002 <= waited <= latency + 1.0, (loop_id, latency, waited)
            # the result, two messages' template and the call (the embedded target counts
            # a tool_use block as 16 tokens, leaves OpenAI's arguments out)
            result = plan.steps_plan[int(before["agent_step"]) - 1].result_tokens
            grown = after["input_tokens"] - before["input_tokens"]
            assert result <= grown <= result + 2 * 4 + 16 + 2, (loop_id, grown, result)
    assert ends["answer"] >= 5 and ends["cut"] <= USERS, ends
    assert frame.agent_step.max() >= 3
    assert (frame.groupby("session_id").size() >= 2).sum() >= 5  # multi-step loops
    sized = (frame.input_tokens - frame.target_input_tokens).abs()
    assert (sized <= 3).mean() >= 0.9, sized.describe()


def test_an_agent_on_the_completions_api_is_refused_before_any_load(tmp_path: Path) -> None:
    results = tmp_path / "r"
    res = zerohop("run", "--workload", str(AGENT_YAML), "--api", "openai-completions",
                  "--duration", "5s", "--results-dir", str(results))
    assert_one_line_error(res, 2, "workload 'agent' is an agent loop and openai-completions "
                                  "has no tools: use --api openai-chat or anthropic or "
                                  "openai-responses")
    assert len(res.stderr.strip().splitlines()) == 1
    assert not results.exists()  # refused with the flags: nothing started
    # the class named on the command line (its default file): refused by Locust's start
    res = zerohop("run", "--only", "Agent", "--api", "openai-completions", "--duration", "5s",
                  "--telemetry", "none", "--results-dir", str(results))
    assert_one_line_error(res, 2, "Agent: workload 'agent' is an agent loop and "
                                  "openai-completions has no tools")
    assert len(res.stderr.strip().splitlines()) == 1
    runs = list(results.iterdir())
    assert all(not (run / "requests.parquet").exists() for run in runs)  # nothing sent


def test_locust_lists_the_agent_class() -> None:
    out = subprocess.run([sys.executable, "-m", "locust", "-f", str(REPO / "loadtests"),
                          "--list"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = out.stdout.split("Available Users:")[-1].split()
    assert "Agent" in listed and "Conversation" in listed
