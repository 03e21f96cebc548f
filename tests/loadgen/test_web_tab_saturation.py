"""The web UI's zerohop tab shows the live saturation verdict in the progress line's
words, read from the run folder's feed at each poll; a new test starts a new verdict
(src/zerohop/loadgen/web_tab.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerohop.core.layout import LIVE_DIR
from zerohop.loadgen.live_stats import LiveLatencies
from zerohop.loadgen.runtime import ProcessRuntime
from zerohop.loadgen.web_tab import LiveSaturation, ReportState, stats_json, tab_rows

pytestmark = pytest.mark.unit

RATE = 20  # arrivals a second


def feed_line(second: int, served_share: float) -> dict[str, Any]:
    """A process's line after `second` seconds, `served_share` of the arrivals answered
    (first in, first out: the oldest waiting arrived backlog ÷ rate ago)."""
    offered = RATE * second
    answered = int(offered * served_share)
    wait = (offered - answered) / RATE + 0.05 if offered > answered else None
    return {"ts": 5000.0 + second, "offered": offered, "dropped": 0, "completed": answered,
            "answered": answered, "oldest_wait_s": wait, "oldest_in_flight_s": wait,
            "first_token_s": 0.05, "e2e_s": 0.1}


def write(run_dir: Path, line: dict[str, Any]) -> None:
    with open(run_dir / LIVE_DIR / "local-1.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def saturation_note(rows: list[dict[str, Any]]) -> str | None:
    return next((row["note"] for row in rows if row["workload"] == "Saturation"), None)


def test_the_tab_says_keeping_up_then_saturated_and_a_new_test_starts_afresh(
        tmp_path: Path) -> None:
    (tmp_path / LIVE_DIR).mkdir()
    rt = ProcessRuntime(role="local", run_dir=tmp_path)
    report, live = ReportState(), LiveLatencies()
    saturation = LiveSaturation()
    for second in range(1, 40):  # an earlier test in this web UI: overloaded throughout
        write(tmp_path, feed_line(second, 0.5))
    watch = saturation.poll(rt)
    assert saturation_note(tab_rows(live, rt, report, watch)) is None  # its lines skipped
    assert stats_json(live, rt, report, watch)["saturation"] is None
    notes, verdicts = [], []
    for second in range(40, 80):  # this test: half of the arrivals answered
        write(tmp_path, feed_line(second, 0.5))
        watch = saturation.poll(rt)
        notes.append(saturation_note(tab_rows(live, rt, report, watch)))
        verdicts.append(stats_json(live, rt, report, watch)["saturation"])
    # the verdict needs a whole window (15 s) of evidence: keeping up until then
    assert notes[:10] == ["keeping up"] * 10 and not verdicts[9]["saturated"]
    final = verdicts[-1]
    assert final["saturated"] and final["signal"] == "first_token_wait"
    assert notes[-1] == f"SATURATED since {final['since_s']:.0f} s (the first-token wait)"
    assert notes[-1] == watch.status().strip()  # the progress line's words
    saturation.restart()  # Locust's test_start: the next test's verdict starts afresh
    for second in range(80, 100):  # every arrival answered
        write(tmp_path, feed_line(second, 1.0))
        watch = saturation.poll(rt)
    assert saturation_note(tab_rows(live, rt, report, watch)) == "keeping up"
    assert stats_json(live, rt, report, watch)["saturation"]["saturated"] is False
