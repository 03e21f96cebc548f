"""The zerohop tab in real headless Chromium: Locust's React UI renders our table with live
exact percentiles, then the report's path after the stop; a screenshot to look at."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.chromium import LAUNCH_ARGS, require_chromium
from tests.loadgen.web_ui import locust_web_ui, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.integration]

COORDINATOR_SCREENSHOT = Path("/tmp/zerohop_web_tab.png")
UI_TIMEOUT_MS = 60_000  # how long we wait for the UI's 2-second poll, never a judged figure


def test_zerohop_tab_shows_live_percentiles_then_the_report(tmp_path: Path) -> None:
    chromium, sync_api = require_chromium()
    with locust_web_ui(tmp_path, "ShortQueryFlood") as ui, \
            tempfile.TemporaryDirectory(prefix="zerohop-chromium-") as profile, \
            sync_api.sync_playwright() as playwright:
        assert ui.post("/swarm", {"user_count": "2", "spawn_rate": "2", "host": ""})["success"]
        wait_for(lambda: ui.get("/zerohop/stats")["workloads"], 90, "first records")
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(chromium), headless=True, args=list(LAUNCH_ARGS),
            viewport={"width": 1600, "height": 700})
        try:
            page = context.pages[0] if context.pages else context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(ui.url + "/?tab=zerohop")
            tab = page.get_by_role("tab", name="zerohop")
            assert tab.get_attribute("aria-selected") == "true"
            table = page.locator("table")
            table.get_by_text("short_query_flood").wait_for(timeout=UI_TIMEOUT_MS)
            headers = table.locator("th").all_inner_texts()
            assert "TTFT p99 (ms)" in headers and "ITL p50 (ms)" in headers, headers
            cells = table.locator("tr", has_text="short_query_flood").locator("td")
            values = dict(zip(headers, cells.all_inner_texts(), strict=True))
            assert int(values["Requests"]) > 0, values
            assert float(values["TTFT p50 (ms)"]) > 0, values

            assert ui.post("/stop")["success"]
            report = wait_for(lambda: ui.get("/zerohop/stats")["report"]["path"], 90,
                              "the report's path")
            table.get_by_text(report).wait_for(timeout=UI_TIMEOUT_MS)
            shot = tmp_path / "web_tab.png"
            page.screenshot(path=str(shot), full_page=True)
            assert not errors, errors
        finally:
            context.close()
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
    shutil.copyfile(shot, COORDINATOR_SCREENSHOT)
