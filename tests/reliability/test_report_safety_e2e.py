"""A real run against a target that answers with hostile strings — an in-stream error
whose message is a script, a LoRA adapter whose name is markup — and the report opened
in real headless Chromium: everything shown as text, nothing executed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import open_page, require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.integration]

SCRIPT = "<script>alert('zh-msg')</script>"
ADAPTER = "<img src=x onerror=alert('zh-adapter')>"


def test_hostile_server_strings_are_inert_in_the_report(tmp_path: Path) -> None:
    require_chromium()  # before the run: skip (or fail when required) without Chromium
    sim_config = tmp_path / "sim.yaml"
    sim_config.write_text(json.dumps({
        "models": [{"model": "llama-3-8b", "lora": {"adapters": [ADAPTER, "plain"],
                                                     "max_loras": 2}}],
        "faults": {"stream_error": {"probability": 0.3, "after": 1, "type": "boom",
                                    "message": SCRIPT}},
    }))
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps({
        "kind": "lora_mix", "name": "hostile", "adapters": [ADAPTER, "plain"],
        "base_model_share": 0.0, "input_tokens": 32, "max_tokens": 8,
        "load": {"kind": "closed", "users": 4},
    }))
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--workload", str(workload), "--only", "LoRAMix",
         "--sim-args", f"--config {sim_config}", "--duration", "8s", "--results-dir",
         str(tmp_path / "r")],
        capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    report = next((tmp_path / "r").glob("*/report.html"))
    html = report.read_text()
    assert SCRIPT not in html and ADAPTER not in html  # never raw in the page

    seen = _open(report)
    assert seen["dialogs"] == [] and seen["errors"] == []
    assert SCRIPT in seen["text"]  # shown, as text
    assert ADAPTER in seen["text"]


def _open(page_path: Path) -> dict[str, Any]:
    with open_page(page_path) as (page, events):
        page.wait_for_function("document.body.dataset.chartsRendered !== undefined")
        text = page.inner_text("body")
    return {"dialogs": events.dialogs, "errors": events.errors, "text": text}
