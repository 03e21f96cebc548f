"""The report in real headless Chromium: no console errors, every chart drawn,
hostile strings shown as text and never executed, a screenshot to look at."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.report.conftest import RunFactory
from tests.report.synthetic import HOSTILE
from zerohop.report import build_comparison, build_report

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
COORDINATOR_SCREENSHOT = Path("/tmp/zerohop_report.png")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

if not CHROMIUM.exists():  # pragma: no cover - depends on the machine
    pytest.skip(
        f"{CHROMIUM} not installed (apt-get install -y chromium); the browser checks "
        "of the report cannot run here",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

# Non-blank pixel count of every chart canvas (uPlot draws series on a <canvas>).
CANVAS_INK = """
() => Array.from(document.querySelectorAll('.zh-chart')).map(host => {
  const canvas = host.querySelector('canvas');
  if (!canvas || canvas.width === 0 || canvas.height === 0) return [host.id, 0];
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let ink = 0;
  for (let i = 3; i < data.length; i += 4) { if (data[i] !== 0) ink++; }
  return [host.id, ink];
})
"""


def _open(page_path: Path, screenshot: Path) -> dict[str, Any]:
    """Load the page, collect console errors, page errors and dialogs."""
    problems: list[str] = []
    dialogs: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})

            def on_console(message: Any) -> None:
                if message.type in ("error", "warning"):
                    problems.append(f"console {message.type}: {message.text}")

            def on_dialog(dialog: Any) -> None:
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("console", on_console)
            page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
            page.on("dialog", on_dialog)
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("document.body.dataset.chartsRendered !== undefined")
            result = {
                "problems": problems,
                "dialogs": dialogs,
                "total": int(page.evaluate("document.body.dataset.chartsTotal")),
                "rendered": int(page.evaluate("document.body.dataset.chartsRendered")),
                "hosts": page.evaluate("document.querySelectorAll('.zh-chart').length"),
                "ink": page.evaluate(CANVAS_INK),
                "text": page.inner_text("body"),
            }
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return result


def test_report_renders_every_chart_without_errors(hostile_run: Path, tmp_path: Path) -> None:
    out = build_report(hostile_run, tmp_path / "report.html")
    shot = tmp_path / "report.png"
    seen = _open(out, shot)
    assert seen["problems"] == []
    assert seen["dialogs"] == []  # <script>alert(1)</script> never ran
    assert seen["total"] == seen["rendered"] == seen["hosts"] >= 15
    blank = [chart_id for chart_id, ink in seen["ink"] if ink < 200]
    assert blank == []
    # the hostile error message and adapter name are on the page, as text
    assert seen["text"].count(HOSTILE) >= 2
    assert shot.stat().st_size > 50_000
    shutil.copyfile(shot, COORDINATOR_SCREENSHOT)


def test_comparison_page_renders(make_run: RunFactory, tmp_path: Path) -> None:
    base = make_run(noise_seed=1, name="base")
    slower = make_run(noise_seed=2, tpot_scale=1.2, name="slower")
    out = build_comparison([base, slower], tmp_path / "compare.html")
    seen = _open(out, tmp_path / "compare.png")
    assert seen["problems"] == [] and seen["dialogs"] == []
    assert seen["total"] == seen["rendered"] == seen["hosts"] > 0
    assert all(ink >= 200 for _, ink in seen["ink"])
    assert "TPOT worse" in seen["text"]
