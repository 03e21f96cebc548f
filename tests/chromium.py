"""Headless Chromium for the browser tier: found one way, launched one way, and charts
checked for drawn pixels, by every browser test.

Why one module: tests that each looked for Chromium their own way disagreed with CI
(one hardcoded path, another PATH), and a tier whose tests all skip passes. With
`ZEROHOP_REQUIRE_BROWSER=1` a missing Chromium or Playwright fails the test instead.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.tiers import skip_unless_required

REQUIRE_ENV = "ZEROHOP_REQUIRE_BROWSER"
PATH_NAMES = ("chromium", "chromium-browser")
FALLBACK = Path("/usr/bin/chromium")
LAUNCH_ARGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# A chart counts as drawn when its plotting area holds at least this many opaque pixels:
# a 1.5 px line across a ~500 px wide plot is several hundred; axes, tick labels and the
# 7 %-alpha grid lines (uPlot's default) never count, so a chart with no series is 0.
MIN_CHART_INK = 100
DRAW_TIMEOUT_MS = 15_000

# Opaque pixels inside each chart's plotting area (uPlot's `.u-over` box, mapped onto the
# canvas's own pixel grid): series ink only, not the frame around it.
CHART_INK_JS = """
() => Array.from(document.querySelectorAll('.zh-chart')).map(host => {
  const canvas = host.querySelector('canvas');
  const over = host.querySelector('.u-over');
  if (!canvas || !over || canvas.width === 0 || canvas.height === 0) return [host.id, 0];
  const box = canvas.getBoundingClientRect();
  const plot = over.getBoundingClientRect();
  const sx = canvas.width / box.width, sy = canvas.height / box.height;
  const x = Math.max(0, Math.floor((plot.left - box.left) * sx));
  const y = Math.max(0, Math.floor((plot.top - box.top) * sy));
  const w = Math.min(canvas.width - x, Math.ceil(plot.width * sx));
  const h = Math.min(canvas.height - y, Math.ceil(plot.height * sy));
  if (w <= 0 || h <= 0) return [host.id, 0];
  // read a copy, not the chart's own context (repeated readbacks of it make Chromium warn)
  const probe = document.createElement('canvas');
  probe.width = w; probe.height = h;
  const ctx = probe.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(canvas, x, y, w, h, 0, 0, w, h);
  const data = ctx.getImageData(0, 0, w, h).data;
  let ink = 0;
  for (let i = 3; i < data.length; i += 4) { if (data[i] >= 128) ink++; }
  return [host.id, ink];
})
"""
ALL_DRAWN_JS = (
    "min => document.body.dataset.chartsRendered !== undefined && "
    f"({CHART_INK_JS})().every(([, ink]) => ink >= min)"
)


def find_chromium() -> Path | None:
    """`chromium`, then `chromium-browser` on PATH, then /usr/bin/chromium."""
    for name in PATH_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    return FALLBACK if FALLBACK.exists() else None


def require_chromium() -> tuple[Path, Any]:
    """(Chromium's path, playwright.sync_api), or skip — or fail when required."""
    chromium = find_chromium()
    if chromium is None:
        skip_unless_required(REQUIRE_ENV, "Chromium not found (chromium / chromium-browser "
                             f"on PATH, {FALLBACK}); apt-get install -y chromium")
    try:
        import playwright.sync_api as sync_api
    except ImportError:
        skip_unless_required(REQUIRE_ENV, "the playwright package is not installed "
                             "(pip install '.[dev]')")
    assert chromium is not None
    return chromium, sync_api


@dataclass
class PageEvents:
    """What a page did that a test wants to be nothing: errors and dialogs."""

    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@contextmanager
def open_page(
    path: Path, *, width: int = 1400, height: int = 1000, warnings: bool = False
) -> Iterator[tuple[Any, PageEvents]]:
    """A fresh headless Chromium (its own profile folder) with `path` loaded; console
    errors (and warnings if asked), page errors and dialogs are collected."""
    chromium, sync_api = require_chromium()
    events = PageEvents()
    kinds = ("error", "warning") if warnings else ("error",)

    def on_console(message: Any) -> None:
        if message.type in kinds:
            events.errors.append(f"console {message.type}: {message.text}")

    def on_dialog(dialog: Any) -> None:
        events.dialogs.append(dialog.message)
        dialog.dismiss()

    with tempfile.TemporaryDirectory(prefix="zerohop-chromium-") as profile, \
            sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(chromium),
            headless=True,
            args=list(LAUNCH_ARGS),
            viewport={"width": width, "height": height},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.on("console", on_console)
            page.on("pageerror", lambda e: events.errors.append(f"pageerror: {e}"))
            page.on("dialog", on_dialog)
            page.goto(path.resolve().as_uri())
            yield page, events
        finally:
            context.close()


OPEN_FOLDS_JS = "() => document.querySelectorAll('details').forEach(d => { d.open = true; })"


def chart_ink(page: Any, min_ink: int = MIN_CHART_INK) -> dict[str, int]:
    """Chart id → opaque pixels in its plotting area, once the page's chart script has
    run, every fold (`<details>`, whose charts are drawn when opened) is open and every
    chart is drawn (or DRAW_TIMEOUT_MS passed: then the counts show which chart is
    blank)."""
    from playwright.sync_api import TimeoutError as DrawTimeout  # a page exists: installed

    page.wait_for_function("document.body.dataset.chartsRendered !== undefined")
    page.evaluate(OPEN_FOLDS_JS)
    with contextlib.suppress(DrawTimeout):  # the counts below then show the blank chart
        page.wait_for_function(ALL_DRAWN_JS, arg=min_ink, timeout=DRAW_TIMEOUT_MS)
    return {chart_id: int(ink) for chart_id, ink in page.evaluate(CHART_INK_JS)}


def blank_charts(ink: dict[str, int], min_ink: int = MIN_CHART_INK) -> dict[str, int]:
    return {chart_id: n for chart_id, n in ink.items() if n < min_ink}
