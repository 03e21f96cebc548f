"""Conversations, prefix caches, reasoning and tool calls in the report's analysis
(analysis/latency/sessions.py) and its section (report/present_sessions.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from zerohop.analysis.latency.sessions import summarise_sessions
from zerohop.analysis.run_analysis import analyse_run
from zerohop.analysis.run_data import RunData, frame_from_rows
from zerohop.analysis.timeseries import Timeline
from zerohop.report.present import report_page
from zerohop.report.render import render_page

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0


def _row(i: int, **fields: Any) -> dict[str, Any]:
    base = {"workload": "chat", "outcome": "ok", "sent_ts": T0 + i, "scheduled_ts": T0 + i,
            "end_ts": T0 + i + 0.5, "ttft_ms": 100.0, "e2e_ms": 500.0, "tpot_ms": 10.0,
            "input_tokens": 1000, "output_tokens": 40}
    return {**base, **fields}


def _telemetry(rows: list[tuple[float, str, float]]) -> pd.DataFrame:
    return pd.DataFrame({
        "ts": [r[0] for r in rows], "source": pd.Categorical(["prom"] * len(rows)),
        "metric": pd.Categorical([r[1] for r in rows]),
        "labels": pd.Categorical(["{}"] * len(rows)), "value": [r[2] for r in rows],
    })


def _sessions(rows: list[dict[str, Any]], telemetry: pd.DataFrame | None = None) -> Any:
    frame, _itl = frame_from_rows(rows)
    return summarise_sessions(frame, _telemetry([]) if telemetry is None else telemetry,
                              Timeline(T0, 5.0, 4))


def test_a_plain_run_has_no_section() -> None:
    assert _sessions([_row(i) for i in range(10)]) is None


def test_cache_hit_rate_from_usage_and_from_the_servers_counters() -> None:
    # 10 requests of 1000 prompt tokens: half of them had 800 cached, half none
    rows = [_row(i, cached_tokens=800 if i % 2 else 0, ttft_ms=20.0 if i % 2 else 200.0)
            for i in range(10)]
    telemetry = _telemetry([(T0 + 1, "prefix_cache_hit_tokens_per_s", 40.0),
                            (T0 + 1, "prefix_cache_query_tokens_per_s", 100.0)])
    cache = _sessions(rows, telemetry).cache
    assert cache.hit_rate == pytest.approx(0.4)
    assert cache.server_hit_rate == pytest.approx(0.4)
    assert [b.label for b in cache.by_share] == ["0%–25%", "75%–100%"]
    cold, warm = cache.by_share
    assert (cold.requests, cold.ttft_p50_ms, warm.requests, warm.ttft_p50_ms) == (5, 200, 5, 20)
    assert cache.usage_series[0] == pytest.approx(0.32)  # requests 0..4: 2 × 800 of 5,000
    assert cache.server_series[0] == pytest.approx(0.4)
    assert math.isnan(cache.server_series[1])


def test_turns_and_sessions() -> None:
    rows = [_row(3 * s + t, session_id=f"s{s}", turn=t + 1, input_tokens=100 * (t + 1),
                 ttft_ms=10.0 * (t + 1)) for s in range(2) for t in range(3)]
    analysis = _sessions(rows)
    assert [(r.turn, r.requests, r.input_tokens_mean, r.ttft_p50_ms) for r in analysis.turns] == [
        (1, 2, 100, 10), (2, 2, 200, 20), (3, 2, 300, 30)]
    totals = analysis.sessions
    assert (totals.sessions, totals.turns_mean) == (2, 3)
    assert totals.session_time_p50_s == pytest.approx(2.5)  # first send → last end
    assert totals.tokens_mean == pytest.approx(600 + 3 * 40)


def test_reasoning_split_and_agent_steps() -> None:
    rows = [_row(i, reasoning_tokens=30, ttfo_ms=300.0, agent_step=1, tool_calls=1,
                 ttft_ms=10.0 * (i + 1), e2e_ms=100.0 * (i + 1)) for i in range(4)]
    rows += [_row(4 + i, agent_step=2, tool_calls=0) for i in range(4)]
    analysis = _sessions(rows)
    reasoning = analysis.reasoning
    assert (reasoning.requests, reasoning.ttft_p50_ms, reasoning.ttfo_p50_ms) == (4, 25, 300)
    assert reasoning.reasoning_share == pytest.approx(30 / 40)
    assert analysis.tool_calls == 4
    assert [(s.step, s.requests, s.with_tool_calls) for s in analysis.agent_steps] == [
        (1, 4, 4), (2, 4, 0)]
    first = analysis.agent_steps[0]
    assert (first.ttft_p50_ms, first.e2e_p50_ms) == (25, 250)
    assert first.ttft_p99_ms == pytest.approx(39.7) and first.e2e_p99_ms == pytest.approx(397)


def _loop(session: str, start: int, steps: int, end: str | None, *,
          failed_last: bool = False) -> list[dict[str, Any]]:
    """One agent loop's records: a tool call at every step but the last, whose
    `agent_end` is `end` (None: the loop ended otherwise)."""
    rows = []
    for k in range(1, steps + 1):
        last = k == steps
        rows.append(_row(start + k, session_id=session, agent_step=k,
                         tool_calls=0 if last and end == "answer" else 1,
                         agent_end=end if last else None,
                         outcome="http_500" if last and failed_last else "ok"))
    return rows


def test_agent_loops_steps_and_how_they_ended() -> None:
    rows = (_loop("a", 0, 3, "answer") + _loop("b", 10, 1, "answer") + _loop("c", 20, 4, "cap")
            + _loop("d", 30, 2, None, failed_last=True) + _loop("e", 40, 2, None))
    rows += [_row(60 + t, session_id="chat", turn=t + 1) for t in range(3)]  # a conversation
    analysis = _sessions(rows)
    loops = analysis.agent_loops
    assert (loops.loops, loops.answered, loops.capped, loops.other) == (5, 2, 1, 2)
    assert (loops.steps_mean, loops.steps_p50, loops.steps_max) == (pytest.approx(2.4), 2, 4)
    assert loops.loop_time_p50_s == pytest.approx(1.5)  # first send → last end
    # ok calls only: loop d's step 2 failed
    assert [(s.step, s.requests) for s in analysis.agent_steps] == [
        (1, 5), (2, 3), (3, 2), (4, 1)]
    # the conversation's sessions are its own: the loops are not among them
    assert (analysis.sessions.sessions, analysis.sessions.turns_mean) == (1, 3)


def test_the_report_shows_the_section(tmp_path: Path) -> None:
    rows = [_row(i, cached_tokens=500, session_id="<s>", turn=1 + i % 2) for i in range(8)]
    frame, itl = frame_from_rows(rows)
    run = RunData(tmp_path, {"run_id": "r", "load": {"duration_s": 8.0}}, frame, itl,
                  _telemetry([]), None, "jsonl")
    page = report_page(analyse_run(run), "now")
    html = render_page("report.html.j2", page.context, page.charts)
    assert 'id="sessions"' in html and "Prefix-cache hit rate" in html
    assert "<strong>50.0 %</strong>" in html  # 500 of 1,000 prompt tokens
    assert "Per turn" in html


def test_the_report_shows_agent_loops(tmp_path: Path) -> None:
    rows = _loop("<script>x</script>", 0, 3, "answer") + _loop("l2", 10, 4, "cap")
    frame, itl = frame_from_rows(rows)
    run = RunData(tmp_path, {"run_id": "r", "load": {"duration_s": 20.0}}, frame, itl,
                  _telemetry([]), None, "jsonl")
    page = report_page(analyse_run(run), "now")
    html = render_page("report.html.j2", page.context, page.charts)
    section = html[html.index("<h3>Agent loops</h3>"):]
    assert "ended by an answer: <strong>1</strong>, by the step cap: <strong>1</strong>" \
        in section
    assert "steps per loop: mean 3.5, p50 4, max 4" in section
    assert "<script>x</script>" not in html  # nothing of the records unescaped
    assert section.count('<tr><td class="num">') >= 4  # a row per step

