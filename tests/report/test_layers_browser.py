"""The arms page's "Layers" section in headless Chromium: it fits 1,400 px without a
horizontal scroll, its figures are on screen, and a hostile replica name is text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.chromium import open_page
from tests.report.test_layers_section import layered_run, summary_of
from tests.synthetic_runs import HOSTILE
from zerohop.report.build import write_comparison
from zerohop.report.present_layers import layers_section

pytestmark = pytest.mark.browser

SCREENSHOT = Path("/tmp/zerohop_layers.png")


def test_layers_section_fits_1400_px_and_shows_its_figures(tmp_path: Path) -> None:
    comparisons, summary = summary_of(layered_run(replica_names=(HOSTILE, "127.0.0.1:8001")))
    section = layers_section(summary)
    page_path = write_comparison(comparisons, tmp_path / "arms.html", layers=summary)
    with open_page(page_path, width=1400, height=1000) as (page, events):
        page.wait_for_function("document.body.dataset.chartsRendered !== undefined")
        scroll = page.evaluate("document.documentElement.scrollWidth")
        client = page.evaluate("document.documentElement.clientWidth")
        visible = {selector: page.locator(selector).first.is_visible()
                   for selector in ("#layers", "#layer-costs", "#layer-net", "#layer-arms",
                                    "#layer-stream", "#layer-control", "#layer-estimated",
                                    "#layer-arms meter")}
        costs = page.inner_text("#layer-costs")
        net = page.inner_text("#layer-net")
        arms = page.inner_text("#layer-arms")
        answer = page.inner_text(".zh-layer-answer")
        first_screen = page.locator(".zh-layer-answer").bounding_box()
        page.screenshot(path=str(tmp_path / "arms.png"), full_page=True)
    assert events.errors == [] and events.dialogs == []
    assert scroll <= client == 1400
    assert all(visible.values()), visible
    assert first_screen is not None and first_screen["y"] < 1000  # the answer leads
    assert answer == section["answer"][0]
    for row in section["cost_rows"]:
        assert all(cell in costs for cell in row["cells"])
    for row in section["net_rows"]:
        assert all(cell in net for cell in row["cells"])
    assert HOSTILE in arms  # shown as text, never run (no dialog)
    assert all(a["requests"] in arms for a in section["arms"])
    shutil.copyfile(tmp_path / "arms.png", SCREENSHOT)
