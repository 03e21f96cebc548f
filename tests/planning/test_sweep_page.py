"""`zerohop sweep` writes its table page, sweep.html, beside its index.json: one row per
point, its figures recomputed here from the point's own records, a percentile the point
has too few observations for a dash, every string escaped."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.planning.fakes import synthetic_runner
from zerohop.planning.sweep import SweepPlan, read_index, run_sweep
from zerohop.planning.sweep_page import SWEEP_PAGE
from zerohop.report import formatting as fmt
from zerohop.runner.plan import RunPlan

pytestmark = pytest.mark.unit


def plan(tmp_path: Path, name: str) -> SweepPlan:
    base = RunPlan(host="http://127.0.0.1:9", api="openai-chat", workloads=[], classes=[],
                   users=8, rate=None, duration_s=20, telemetry="none", slo={}, name=name,
                   workers=0, results_dir=tmp_path, seed=1)
    return SweepPlan(base=base, mode="rate", loads=[2, 4, 16])


def table_rows(page: str) -> list[list[str]]:
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                          row, flags=re.S)]
            for row in rows]


# the fewest observations each percentile needs, written out (p99: one beyond it)
NEEDS = {50: 2, 99: 100}


def percentile_cell(values: np.ndarray, q: int) -> str:
    return fmt.DASH if values.size < NEEDS[q] else fmt.ms(float(np.percentile(values, q)))


def plain_cells(run_dir: Path) -> list[str]:
    """A point's n and latency cells, from its records by a route of the test's own."""
    table = pq.read_table(run_dir / "requests.parquet").to_pandas()
    ok = table[table["outcome"] == "ok"]
    ttft = ok["ttft_ms"].dropna().to_numpy()
    itl = np.concatenate([np.asarray(gaps, dtype=float) for gaps in ok["itl_ms"]])
    e2e = ok["e2e_ms"].dropna().to_numpy()
    return [f"{ttft.size:,}", *(percentile_cell(values, q)
                                for values in (ttft, itl, e2e) for q in (50, 99))]


def test_one_row_per_point_with_figures_from_its_records(tmp_path: Path) -> None:
    result = run_sweep(plan(tmp_path, "t"), runner=synthetic_runner)
    page = (result.sweep_dir / SWEEP_PAGE).read_text(encoding="utf-8")
    points = read_index(result.sweep_dir)["points"]
    rows = table_rows(page)
    assert len(rows) == len(points) == 3
    for row, point in zip(rows, sorted(points, key=lambda p: p.load), strict=True):
        assert row[:5] == [
            f"{point.load:g}", fmt.rate(point.offered_rps), fmt.rate(point.achieved_rps),
            fmt.rate(point.goodput_rps), fmt.pct(point.error_pct, 1)]
        assert row[5:12] == plain_cells(result.sweep_dir / point.run_dir)
        assert point.itl_p50_ms > 0 and point.goodput_rps > 0  # the new figures are measured
        assert (row[12] != "") is point.saturated
        assert f'href="{point.run_dir}/"' in page
    # 40 and 80 requests have no p99; 16 req/s (the fake's 10 req/s for 20 s) has one
    assert [row[7] == fmt.DASH for row in rows] == [True, True, False]
    assert "saturated at 16" in page  # the fake saturates at 10 req/s
    assert "p99 n ≥ 100" in html.unescape(page)


def test_strings_are_escaped(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    result = run_sweep(dataclasses.replace(plan(tmp_path, hostile), loads=[2]),
                       runner=synthetic_runner)
    page = (result.sweep_dir / SWEEP_PAGE).read_text(encoding="utf-8")
    assert hostile not in page and html.escape(hostile) in page
