"""The page is self-contained, escapes everything from the run, and carries a CSP
that admits exactly its own inline scripts."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path

import pytest

from tests.run_fixtures import RunFactory
from tests.synthetic_runs import HOSTILE
from zerohop.report import build_comparison, build_report
from zerohop.report.charts import encode_for_html
from zerohop.report.render import templates_dir

pytestmark = pytest.mark.unit

UPLOT_HEAD = (templates_dir() / "static" / "uPlot.iife.min.js").read_text()[:80]


@pytest.fixture(scope="module")
def page(hostile_run: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = build_report(hostile_run, tmp_path_factory.mktemp("page") / "report.html")
    return out.read_text(encoding="utf-8")


def _chart_data(html: str) -> list[dict]:
    match = re.search(
        r'<script type="application/json" id="zh-chart-data">(.*?)</script>', html, re.S
    )
    assert match is not None
    return json.loads(match.group(1))


def test_page_is_self_contained_with_the_chart_library_embedded_once(page: str) -> None:
    assert page.count(UPLOT_HEAD) == 1
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=", page, re.I)
    assert not re.search(r"<link\b", page, re.I)
    assert "@import" not in page
    assert not re.search(r"""url\(\s*['"]?https?:""", page, re.I)
    assert not re.search(r"""\son[a-z]+\s*=""", page, re.I)  # no inline event handlers


def test_csp_admits_exactly_the_inline_scripts_and_style(page: str) -> None:
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert found is not None
    csp = html.unescape(found.group(1))  # autoescaped attribute (&#39;)
    assert "default-src 'none'" in csp
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 2  # uPlot + the page script; data is type=application/json
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)  # type: ignore[union-attr]
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in csp


def test_hostile_strings_are_text_and_secrets_are_gone(page: str) -> None:
    assert HOSTILE not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert page.count(escaped) >= 3  # error sample, adapter row, config value
    assert "sk-live-secret-123456" not in page
    assert "hunter2" not in page


def test_chart_data_is_valid_and_every_chart_has_a_container(page: str) -> None:
    charts = _chart_data(page)
    ids = [c["id"] for c in charts]
    assert len(ids) == len(set(ids)) >= 15
    for chart in charts:
        assert page.count(f'id="{chart["id"]}"') == 1  # no clash with a section id
        assert chart["series"], chart["id"]
        for series in chart["series"]:
            assert len(series["values"]) == len(chart["x"])
    titles = {c["title"] for c in charts}
    for expected in (
        "Offered vs achieved load",
        "SM utilisation (%)",
        "PCIe RX / TX (GB/s)",
        "Power (W)",
        "Temperature (°C)",
        "Server queue (requests)",
        "KV cache usage (%)",
        "GPU memory used (GB)",
        "TTFT CDF (ok requests)",
        "PCIe bandwidth vs transfer size",
    ):
        assert expected in titles
    lanes = next(c for c in charts if c["title"] == "PCIe RX / TX (GB/s)")
    assert [s["label"] for s in lanes["series"]] == ["RX GPU 0", "RX GPU 1", "TX GPU 0", "TX GPU 1"]


def test_json_for_html_cannot_close_its_script_element() -> None:
    text = encode_for_html({"label": "</script><script>alert(1)</script>&\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["label"] == "</script><script>alert(1)</script>&\u2028"


def test_every_section_is_present(page: str) -> None:
    for section in (
        "verdict",
        "summary",
        "timeseries",
        "drivers",
        "alerts",
        "distributions",
        "prefill",
        "adapters",
        "errors",
        "fidelity",
        "microbench",
        "environment",
        "glossary",
    ):
        assert f'id="{section}"' in page
    assert "SLOs: 2 of 2 met" in page
    assert "client fidelity OK" in page
    assert "slope ms / 1k input tokens" in page
    assert "Cold is the first request sent to an adapter" in page  # glossary defines cold


def test_comparison_page(make_run: RunFactory, tmp_path: Path) -> None:
    base = make_run(noise_seed=1, name="base")
    slower = make_run(noise_seed=2, tpot_scale=1.2, name="slower")
    again = make_run(noise_seed=3, name="again")
    out = build_comparison([base, slower, again], tmp_path / "compare.html")
    text = out.read_text(encoding="utf-8")
    assert text.count("vs baseline") == 2  # one block per candidate
    assert "TPOT worse" in text and "TPOT within noise" in text
    assert text.count(UPLOT_HEAD) == 1
    charts = _chart_data(text)
    assert any(c["title"] == "TPOT CDF" for c in charts)
    assert [s["label"] for s in charts[0]["series"]] == ["baseline", "candidate"]


@pytest.mark.parametrize(
    "fields",
    [
        {"error_rate": 1.0, "name": "all-failed"},
        {"n_requests": 1, "error_rate": 0.0, "name": "one-request"},
        {"telemetry": False, "microbench": False, "open_loop": False, "name": "bare-closed-loop"},
        {"slo": {}, "adapters": ("only",), "name": "no-slo"},
    ],
    ids=lambda f: f["name"],
)
def test_degenerate_runs_still_report(make_run: RunFactory, tmp_path: Path, fields: dict) -> None:
    fields = {"n_requests": 200, **fields}
    out = build_report(make_run(**fields), tmp_path / "r.html")
    text = out.read_text(encoding="utf-8")
    for chart in _chart_data(text):
        for series in chart["series"]:
            assert len(series["values"]) == len(chart["x"])
    assert 'id="glossary"' in text
