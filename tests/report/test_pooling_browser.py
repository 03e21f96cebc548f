"""A run of the pooling kinds (embedding, rerank) against the embedded target, its report
in real headless Chromium: no console error, every chart drawn, the pooling table
shown with items/s, and no nan, None or empty cell in those workloads' rows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chromium import chart_ink, open_page

pytestmark = pytest.mark.browser

WORKLOADS = """
workloads:
  - {kind: embedding, name: vectors, inputs: {type: uniform, min: 1, max: 4},
     input_tokens: 24, load: {kind: closed, users: 1}}
  - {kind: rerank, name: ranks, documents: 4, query_tokens: 8, document_tokens: 24, top_n: 2,
     load: {kind: closed, users: 1}}
"""


def test_a_pooling_runs_report_in_chromium(tmp_path: Path) -> None:
    (tmp_path / "pooling.yaml").write_text(WORKLOADS)
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--workload", str(tmp_path / "pooling.yaml"),
         "--duration", "4s", "--microbench", "off", "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    with open_page(run / "report.html", warnings=True) as (page, events):
        ink = chart_ink(page)
        total = int(page.evaluate("document.body.dataset.chartsTotal"))
        rendered = int(page.evaluate("document.body.dataset.chartsRendered"))
        pooling = page.inner_text("#pooling")
        rows = page.evaluate(
            "[...document.querySelectorAll('tr')].map(r => [...r.cells].map(c => c.innerText))")
        page.screenshot(path=str(tmp_path / "pooling.png"), full_page=True)
    assert events.errors == [] and events.dialogs == []
    assert total == rendered == len(ink) > 0
    # the request latency charts are E2E's (nothing here has a TTFT to draw)
    assert ink["chart-cdf-e2e_ms"] > 0 and not any(k.startswith("chart-cdf-ttft") for k in ink)
    assert "items/s" in pooling and "vectors" in pooling and "ranks" in pooling
    ours = [cells for cells in rows if cells and cells[0].strip() in ("vectors", "ranks")]
    assert len(ours) >= 6
    for cells in ours:
        assert all(cell.strip() for cell in cells), cells
        assert not any(re.search(r"\b(nan|NaN|None)\b", cell) for cell in cells), cells
