"""The report's saturation verdict and its answers section in real headless Chromium:
each renders without errors, and every figure it shows equals a recomputation in this
test from the run's own records (the queue's onset and the offered rate, counted by
hand), summary.json's saturation block and the manifest's early stop, or answers.json
(each pair compared token by token here, the interval as the roots of its quadratic)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.analysis.test_answers import LOAD_START, answer, document, wilson_by_roots
from tests.chromium import open_page
from tests.planning.fakes import T0, write_fake_run
from zerohop.core.layout import ANSWERS_FILE, SATURATION_STOP_KEY
from zerohop.report.build import build_report
from zerohop.storage.summary_file import write_summary

pytestmark = pytest.mark.browser

OFFERED_RPS, SERVED_RPS, SECONDS = 15.0, 10.0, 60.0
STOP = {"stopped_at_s": 21.0, "planned_s": 60.0}


def overloaded_run(root: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """A queue served first in, first out at 10 req/s of the 15 offered, its load
    stopped early by --stop-when-saturated (the manifest's key): records and times."""
    run_dir = write_fake_run(root, "overloaded", rate_rps=OFFERED_RPS, duration_s=SECONDS)
    table = pq.read_table(run_dir / "requests.parquet").to_pandas()
    arrive = np.arange(len(table)) / OFFERED_RPS
    first = np.maximum(arrive, np.arange(len(table)) / SERVED_RPS) + 0.05
    table["scheduled_ts"] = table["sent_ts"] = T0 + arrive
    table["first_content_ts"], table["ttft_ms"] = T0 + first, (first - arrive) * 1e3
    table["end_ts"], table["e2e_ms"] = T0 + first + 0.6, (first + 0.6 - arrive) * 1e3
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False),
                   run_dir / "requests.parquet")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest[SATURATION_STOP_KEY] = {"saturated": True, "signal": "first_token_wait", **STOP}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir, arrive, first


def onset_s(arrive: np.ndarray, first: np.ndarray, floor_s: float = 1.0) -> int:
    """The second after the oldest request still waiting for its first token last
    waited no more than the floor, counted at each whole second by hand."""
    last_under = 0
    for second in range(1, int(SECONDS)):
        waiting = (arrive <= second) & (first > second)
        wait = second - arrive[waiting].min() if waiting.any() else 0.0
        if wait <= floor_s:
            last_under = second
    return last_under + 1


def test_the_saturation_verdict_in_chromium(tmp_path: Path) -> None:
    run_dir, arrive, first = overloaded_run(tmp_path)
    block = json.loads(write_summary(run_dir).read_text())["saturation"]
    with open_page(build_report(run_dir), warnings=True) as (page, events):
        text = page.inner_text("#saturation")
        warned = page.evaluate("document.getElementById('saturation').className")
    assert events.errors == [] and events.dialogs == []
    since = onset_s(arrive, first)
    assert since == block["since_s"] == 4  # the wait passes 1 s at t = 3 s + its 0.05 s
    offered = arrive.size / SECONDS  # every second of the run offered as many
    assert block["signal"] == "first_token_wait" and block["offered_rps"] == offered
    assert text.startswith(
        f"Saturated since {since} s of the load (found at {block['detected_s']:.0f} s by "
        f"the first-token wait) at {offered:.3g} req/s offered: {block['evidence']}.")
    assert block["detected_s"] >= since + 14  # a whole 15 s window of evidence
    assert text.endswith(f"--stop-when-saturated ended the load at {STOP['stopped_at_s']:.0f} "
                         f"s of the planned {STOP['planned_s']:.0f} s: the figures cover the "
                         "time the load ran.")
    assert "zh-warn" in warned


PAIRS: list[tuple[list[str], list[str], list[float], list[float]]] = [
    # (alone, under load, their logprobs)
    ([" a", " b", " c"], [" a", " b", " c"], [-0.1, -0.2, -0.3], [-0.1, -0.25, -0.3]),
    ([" a", " b", " c"], [" a", " x", " c"], [-0.1, -0.2, -0.3], [-0.4, -0.9, -0.3]),
    ([" a", " b"], [" a", " b", " c"], [-0.5, -0.5], [-0.5, -0.75, -1.0]),
    ([" q", " r"], [" z", " r"], [-0.1, -0.1], [-0.1, -0.1]),
    ([" a", " b", " c", " d"], [" a", " b", " c", " e"], [-1, -1, -1, -1], [-1, -1.5, -1, -1]),
]


def plain_pair(alone: list[str], load: list[str], lp_alone: list[float],
               lp_load: list[float]) -> tuple[int | None, float]:
    """The first index where the tokens differ (a longer answer differs where the
    shorter ends), and the largest |Δ logprob| before it (NaN: none before it)."""
    index = next((i for i, (x, y) in enumerate(zip(alone, load, strict=False)) if x != y),
                 None)
    if index is None and len(alone) != len(load):
        index = min(len(alone), len(load))
    before = len(alone) if index is None else index
    changes = [abs(x - y) for x, y in zip(lp_alone[:before], lp_load[:before], strict=False)]
    return index, max(changes) if changes else float("nan")


def answers_run(root: Path) -> Path:
    rows: list[dict[str, Any]] = []
    for prompt, (alone, load, lp_alone, lp_load) in enumerate(PAIRS):
        rows += [answer(prompt, "alone", alone, lp_alone), answer(prompt, "load", load, lp_load)]
    extra = len(PAIRS)  # one more prompt, answered before the load began: not compared
    rows += [answer(extra, "alone", [" a"], [-0.1]),
             answer(extra, "load", [" a"], [-0.1], sent=LOAD_START - 5.0)]
    run_dir = write_fake_run(root, "answers", rate_rps=5.0, duration_s=20.0)
    (run_dir / ANSWERS_FILE).write_text(json.dumps(document(rows, extra + 1)))
    return run_dir


def test_the_answers_section_in_chromium(tmp_path: Path) -> None:
    page_path = build_report(answers_run(tmp_path))
    with open_page(page_path, warnings=True) as (page, events):
        line = page.inner_text("#answers p strong")
        cells = page.evaluate("""() => Array.from(document.querySelectorAll('#answers tbody tr'))
            .map(tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText.trim()))""")
        muted = page.inner_text("#answers")
    assert events.errors == [] and events.dialogs == []
    found = [plain_pair(*pair) for pair in PAIRS]
    changed = [index for index, _ in found if index is not None]
    low, high = wilson_by_roots(len(changed), len(PAIRS))
    share = 100 * len(changed) / len(PAIRS)
    assert line == (f"answers under load: {len(changed)} of {len(PAIRS)} changed "
                    f"({share:.1f} % [{100 * low:.1f} %, {100 * high:.1f} %]); they diverge "
                    f"at token {float(np.median(changed)):g} (median); 1 prompt(s) not "
                    "compared")
    assert len(cells) == len(PAIRS)
    for row, (alone, load, _, _), (index, change) in zip(cells, PAIRS, found, strict=True):
        assert row[2] == ("same" if index is None else "changed")
        assert row[3] == ("—" if index is None else f"token {index}")
        assert row[4] == f"{len(alone)} / {len(load)}"
        assert row[5] == ("—" if np.isnan(change) else f"{change:.3g}")
    overall = max(c for _, c in found if not np.isnan(c))
    assert re.search(rf"over all pairs\): {overall:.3g}\.", muted)
    assert "1 not answered wholly under load" in muted
