"""`zerohop sweep` writes its table page, sweep.html, beside its index.json: one row per
point, its figures those of the index, every string escaped."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

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


def test_one_row_per_point_with_the_index_figures(tmp_path: Path) -> None:
    result = run_sweep(plan(tmp_path, "t"), runner=synthetic_runner)
    page = (result.sweep_dir / SWEEP_PAGE).read_text(encoding="utf-8")
    points = read_index(result.sweep_dir)["points"]
    rows = table_rows(page)
    assert len(rows) == len(points) == 3
    for row, point in zip(rows, sorted(points, key=lambda p: p.load), strict=True):
        assert row[:11] == [
            f"{point.load:g}", fmt.rate(point.offered_rps), fmt.rate(point.achieved_rps),
            fmt.rate(point.goodput_rps), fmt.pct(point.error_pct, 1),
            fmt.ms(point.ttft_p50_ms), fmt.ms(point.ttft_p99_ms),
            fmt.ms(point.itl_p50_ms), fmt.ms(point.itl_p99_ms),
            fmt.ms(point.e2e_p50_ms), fmt.ms(point.e2e_p99_ms)]
        assert point.itl_p50_ms > 0 and point.goodput_rps > 0  # the new figures are measured
        assert (row[11] != "") is point.saturated
        assert f'href="{point.run_dir}/"' in page
    assert "saturated at 16" in page  # the fake saturates at 10 req/s


def test_strings_are_escaped(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    result = run_sweep(dataclasses.replace(plan(tmp_path, hostile), loads=[2]),
                       runner=synthetic_runner)
    page = (result.sweep_dir / SWEEP_PAGE).read_text(encoding="utf-8")
    assert hostile not in page and html.escape(hostile) in page
