"""The sweep page's "Layers" section in headless Chromium, built from synthetic layer
points: visible, its chart drawn, the knee on screen, a hostile name shown as text,
and no horizontal scroll at 1,400 px."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chromium import blank_charts, chart_ink, open_page
from tests.planning.layer_points import layer_points
from tests.synthetic_runs import HOSTILE
from zerohop.planning.sweep import layer_knee_of, saturation_summary
from zerohop.planning.sweep_page import write_sweep_page

pytestmark = pytest.mark.browser


def test_layers_section_is_visible_and_fits_1400_px(tmp_path: Path) -> None:
    points = layer_points(HOSTILE, knee_at=40.0, replicas=(HOSTILE, "127.0.0.1:8001"))
    page_path = write_sweep_page(tmp_path, "knee", "rate", points, saturation_summary(points),
                                 finished=True, layer_knee=layer_knee_of(points))
    with open_page(page_path, width=1400, height=1000) as (page, events):
        page.wait_for_function("document.body.dataset.chartsRendered !== undefined")
        scroll = page.evaluate("document.documentElement.scrollWidth")
        client = page.evaluate("document.documentElement.clientWidth")
        visible = page.locator("#layers").is_visible()
        text = page.inner_text("#layers")
        ink = chart_ink(page)
        page.screenshot(path=str(tmp_path / "sweep.png"), full_page=True)
    assert events.errors == [] and events.dialogs == []
    assert scroll <= client == 1400
    assert visible
    assert "40 req/s offered" in text and "80.0 %" in text  # the knee, the layer's CPU there
    assert HOSTILE in text  # the arm and replica names as text, never run
    assert len(ink) == 1 and blank_charts(ink) == {}
