"""The report's "Conversations, agent loops, caches and reasoning" section: what
`analysis.sessions` measured, as tables and one chart of the cache hit rate (usage and
/metrics together)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zerohop.analysis.latency.sessions import SessionAnalysis
from zerohop.analysis.run_analysis import MAX_CHART_POINTS, RunAnalysis
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series


def session_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any] | None:
    """Template context (None: the run had no conversations, caches, reasoning or tools)."""
    sessions = analysis.sessions
    if sessions is None:
        return None
    return {
        "cache": _cache(sessions, analysis, charts),
        "turns": [
            {"turn": r.turn, "requests": fmt.count(r.requests),
             "input": fmt.count(r.input_tokens_mean), "ttft_p50": fmt.ms(r.ttft_p50_ms),
             "ttft_p99": fmt.ms(r.ttft_p99_ms), "tpot_p50": fmt.ms(r.tpot_p50_ms)}
            for r in sessions.turns
        ],
        "sessions": None if sessions.sessions is None else {
            "count": fmt.count(sessions.sessions.sessions),
            "turns_mean": f"{sessions.sessions.turns_mean:.1f}",
            "time_p50": fmt.seconds(sessions.sessions.session_time_p50_s),
            "time_p99": fmt.seconds(sessions.sessions.session_time_p99_s),
            "tokens_mean": fmt.count(sessions.sessions.tokens_mean),
        },
        "reasoning": None if sessions.reasoning is None else {
            "requests": fmt.count(sessions.reasoning.requests),
            "ttft_p50": fmt.ms(sessions.reasoning.ttft_p50_ms),
            "ttfo_p50": fmt.ms(sessions.reasoning.ttfo_p50_ms),
            "ttfo_p99": fmt.ms(sessions.reasoning.ttfo_p99_ms),
            "share": fmt.pct(sessions.reasoning.reasoning_share * 100.0),
        },
        "tool_calls": fmt.count(sessions.tool_calls),
        "agent_steps": [
            {"step": s.step, "requests": fmt.count(s.requests),
             "with_calls": fmt.count(s.with_tool_calls), "ttft_p50": fmt.ms(s.ttft_p50_ms),
             "ttft_p99": fmt.ms(s.ttft_p99_ms), "e2e_p50": fmt.ms(s.e2e_p50_ms),
             "e2e_p99": fmt.ms(s.e2e_p99_ms)}
            for s in sessions.agent_steps
        ],
        "agent_loops": _loops(sessions),
    }


def _loops(sessions: SessionAnalysis) -> dict[str, Any] | None:
    loops = sessions.agent_loops
    if loops is None:
        return None
    return {
        "count": fmt.count(loops.loops), "steps_mean": f"{loops.steps_mean:.1f}",
        "steps_p50": f"{loops.steps_p50:.0f}", "steps_max": fmt.count(loops.steps_max),
        "answered": fmt.count(loops.answered), "capped": fmt.count(loops.capped),
        "other": fmt.count(loops.other), "time_p50": fmt.seconds(loops.loop_time_p50_s),
        "time_p99": fmt.seconds(loops.loop_time_p99_s),
    }


def _cache(sessions: SessionAnalysis, analysis: RunAnalysis, charts: list[Chart]
           ) -> dict[str, Any] | None:
    cache = sessions.cache
    if cache is None:
        return None
    x = analysis.timeline.coarsened(MAX_CHART_POINTS).starts_s  # the series' own windows
    series = [Series("from usage (cached ÷ prompt tokens)", cache.usage_series * 100.0)]
    if np.isfinite(cache.server_series).any():
        series.append(Series("from /metrics (hits ÷ queries)", cache.server_series * 100.0,
                             style="dashed"))
    chart = Chart(chart_id="cache-hit-rate", title="Prefix-cache hit rate", kind="time", x=x,
                  series=series, x_label="s since start", y_label="% of prompt tokens")
    charts.append(chart)
    return {
        "hit_rate": fmt.pct(cache.hit_rate * 100.0),
        "server_hit_rate": fmt.DASH if math.isnan(cache.server_hit_rate)
        else fmt.pct(cache.server_hit_rate * 100.0),
        "cached": fmt.count(cache.cached_tokens), "input": fmt.count(cache.input_tokens),
        "by_share": [
            {"share": b.label, "requests": fmt.count(b.requests),
             "ttft_p50": fmt.ms(b.ttft_p50_ms), "ttft_p99": fmt.ms(b.ttft_p99_ms)}
            for b in cache.by_share
        ],
        "chart": chart.chart_id,
    }
