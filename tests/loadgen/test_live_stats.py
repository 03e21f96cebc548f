"""LiveLatencies: the web UI tab's exact per-workload percentiles (loadgen/live_stats.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zerohop.loadgen.live_stats import ALL_WORKLOADS, PERCENTILES, LiveLatencies
from zerohop.loadgen.runtime import ProcessRuntime
from zerohop.loadgen.web_tab import ReportState, tab_rows, table_structure

pytestmark = pytest.mark.unit


def row(workload: str, ttft: float, tpot: float | None, itl: list[float],
        outcome: str = "ok") -> dict[str, Any]:
    return {"workload": workload, "outcome": outcome, "ttft_ms": ttft, "tpot_ms": tpot,
            "itl_ms": itl}


def test_percentiles_are_exact_over_ok_records_per_workload() -> None:
    rng = np.random.default_rng(7)
    live = LiveLatencies()
    ttft = rng.lognormal(3, 0.5, 501)
    itl = [list(rng.exponential(5, 7)) for _ in ttft]
    live.add_many(row("a", t, 5.0 + i % 3, gaps)
                  for i, (t, gaps) in enumerate(zip(ttft, itl, strict=True)))
    live.add(row("a", 1e6, 1e6, [1e6], outcome="timeout_ttft"))  # failures: counted only
    live.add(row("b", 10.0, None, []))  # one token: no TPOT, no ITL

    a, b, total = live.table()
    assert (a["workload"], a["requests"], a["failed"]) == ("a", 502, 1)
    qs = [q for _, q in PERCENTILES]
    for (name, _), want in zip(PERCENTILES, np.percentile(ttft, qs), strict=True):
        assert a[f"ttft_{name}"] == pytest.approx(want, rel=1e-12)
    flat = np.concatenate(itl)
    for (name, _), want in zip(PERCENTILES, np.percentile(flat, qs), strict=True):
        assert a[f"itl_{name}"] == pytest.approx(want, rel=1e-12)
    assert b["tpot_p50"] is None and b["itl_p99"] is None and b["ttft_p50"] == 10.0
    assert total["workload"] == ALL_WORKLOADS and total["requests"] == 503
    both = np.percentile(np.append(ttft, 10.0), qs)
    assert [total[f"ttft_{n}"] for n, _ in PERCENTILES] == pytest.approx(list(both))


def test_the_table_follows_new_records() -> None:
    live = LiveLatencies()
    live.add(row("a", 1.0, 1.0, [1.0]))
    assert live.table()[0]["ttft_p99"] == 1.0
    live.add(row("a", 3.0, 1.0, [1.0]))
    assert live.table()[0]["ttft_p99"] == pytest.approx(np.percentile([1.0, 3.0], 99))
    assert len(live.table()) == 1  # one workload: no "All workloads" row


def test_tab_rows_match_the_table_structure_and_show_the_report() -> None:
    live = LiveLatencies()
    live.add(row("a", 1.23456, 2.0, [3.0]))
    rt = ProcessRuntime(role="local")
    report = ReportState(state="ready", path="/r/report.html")
    rows = tab_rows(live, rt, report)
    keys = {column["key"] for column in table_structure()}
    assert all(set(r) <= keys for r in rows)
    assert rows[0]["ttft_p50"] == 1.23
    assert rows[-1] == {"workload": "Report", "note": "/r/report.html"}
    failed = tab_rows(live, rt, ReportState(state="failed", error="disk full"))
    assert failed[-1]["note"] == "not written: disk full"
