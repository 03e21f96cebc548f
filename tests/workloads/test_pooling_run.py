"""`zerohop run` with an embedding and a rerank workload, real Locust against the
embedded target: the records (E2E, items, input tokens, no TTFT), items/s in the summary
and on the console, and report rows that show neither nan nor None nor an empty cell."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.integration

WORKLOADS = """
workloads:
  - kind: embedding
    name: vectors
    inputs: {type: uniform, min: 2, max: 6}
    input_tokens: {type: uniform, min: 16, max: 48}
    load: {kind: closed, users: 2}
    slo: {e2e_p99_ms: 5000}
  - kind: rerank
    name: ranks
    documents: {type: uniform, min: 3, max: 8}
    query_tokens: 8
    document_tokens: {type: uniform, min: 16, max: 48}
    top_n: 2
    load: {kind: open, rate_rps: 4}
"""


def _rows_of(page: str, workload: str) -> list[list[str]]:
    """The cells of every table row whose first cell is `workload`, as text."""
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        if cells and cells[0] == workload:
            rows.append(cells)
    return rows


def test_embedding_and_rerank_run_under_locust_and_report_items(tmp_path: Path) -> None:
    workloads = tmp_path / "pooling.yaml"
    workloads.write_text(WORKLOADS)
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--workload", str(workloads),
         "--duration", "6s", "--telemetry", "none", "--microbench", "off",
         "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    assert "Traceback" not in res.stdout + res.stderr
    assert "pooling workload" in res.stdout and "items/s" in res.stdout
    assert "TTFT p99" not in res.stdout  # no token-streaming table: nothing streamed
    (run,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]

    frame = pd.read_parquet(run / "requests.parquet")
    assert set(frame["workload"]) == {"vectors", "ranks"}
    failed = frame[frame["outcome"] != "ok"]
    assert failed.empty, failed[["workload", "outcome", "error_message"]].head(5).to_dict(
        "records")
    assert frame["ttft_ms"].isna().all() and frame["tpot_ms"].isna().all()
    assert frame["output_tokens"].isna().all() and frame["max_tokens"].isna().all()
    assert (frame["e2e_ms"] > 0).all() and (frame["input_tokens"] > 0).all()
    vectors, ranks = frame[frame["workload"] == "vectors"], frame[frame["workload"] == "ranks"]
    assert vectors["items"].between(2, 6).all() and ranks["items"].between(3, 8).all()
    assert vectors["items"].nunique() > 1  # the batch size is drawn
    # the usage agrees with what was asked: each text sized by the target's /tokenize
    off = (frame["input_tokens"] - frame["target_input_tokens"]).abs() / frame["items"]
    assert (off <= 1).mean() >= 0.95, off.describe()

    summary = json.loads((run / "summary.json").read_text())
    by_name = {w["workload"]: w for w in summary["workloads"]}
    for name, rows in (("vectors", vectors), ("ranks", ranks)):
        rates, metrics = by_name[name]["rates"], by_name[name]["metrics"]
        assert rates["items_per_s"] > rates["req_per_s"] > 0
        assert rates["input_tokens_per_s"] > rates["items_per_s"]
        assert rates["output_tokens_per_s"] == 0
        assert metrics["items"]["n"] == len(rows)
        assert metrics["items"]["max"] == rows["items"].max()
        assert metrics["ttft_ms"]["n"] == 0 and metrics["ttft_ms"]["p50"] is None
    assert by_name["vectors"]["slo_met"] is True

    page = (run / "report.html").read_text()
    for name in ("vectors", "ranks"):
        rows = _rows_of(page, name)
        assert len(rows) >= 3, name  # summary, pooling and latency rows at least
        for cells in rows:
            assert all(cell and cell.lower() not in ("nan", "none") for cell in cells), cells
            assert not any(re.search(r"\b(nan|None)\b", cell) for cell in cells), cells
        metrics_shown = {cells[1] for cells in rows if len(cells) > 2 and cells[1] in (
            "TTFT", "TPOT", "ITL", "E2E")}
        assert metrics_shown == {"E2E"}, metrics_shown  # no empty TTFT/ITL/TPOT rows
    assert 'id="pooling"' in page
