"""The client certificate on the report's first screen: a line when the run carries one
(`zerohop run --selfcheck`), none otherwise, and escaped like every value."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.certificate_fixtures import OPEN, figures
from tests.run_fixtures import RunFactory
from zerohop.analysis.client.client_certificate import (
    CERTIFICATE_SCHEMA,
    Bounds,
    LoadFacts,
    certificate_document,
    judge,
)
from zerohop.analysis.run_analysis import analyse_run
from zerohop.core.layout import SELFCHECK_FILE
from zerohop.report.build import build_report
from zerohop.report.present import report_page
from zerohop.storage.run_reader import load_run
from zerohop.storage.selfcheck_files import attach_certificate

pytestmark = pytest.mark.unit


def certificate(**change: float) -> dict[str, Any]:
    data = figures(**change)  # type: ignore[arg-type]
    load: LoadFacts = OPEN
    verdict = judge(data, load, Bounds(), machine_cpus=2)
    return certificate_document(data, load, Bounds(), verdict, {"hostname": "<b>box</b>"},
                                run_id="sc", created_at="now")


def with_certificate(make_run: RunFactory, tmp_path: Path, doc: dict[str, Any]) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(make_run(), run_dir)
    attach_certificate(run_dir, doc)
    return run_dir


def checks(run_dir: Path) -> list[dict[str, str]]:
    page = report_page(analyse_run(load_run(run_dir)), "now")
    return list(page.context["verdict"]["checks"])


def test_a_passing_certificate_is_an_ok_line_with_its_figures(
        make_run: RunFactory, tmp_path: Path) -> None:
    run_dir = with_certificate(make_run, tmp_path, certificate())
    line = next(c for c in checks(run_dir) if c["text"].startswith("client certificate"))
    assert line["status"] == "ok"
    assert line["text"].startswith("client certificate PASS: TTFT error p99 0.3 ms (bound 1 ms)")
    attached = json.loads((run_dir / SELFCHECK_FILE).read_text(encoding="utf-8"))
    assert attached["schema"] == CERTIFICATE_SCHEMA and attached["verdict"]["result"] == "PASS"


def test_a_failing_certificate_warns_with_its_reasons_and_advice(
        make_run: RunFactory, tmp_path: Path) -> None:
    run_dir = with_certificate(make_run, tmp_path, certificate(ttft_p99=3.0))
    line = next(c for c in checks(run_dir) if c["text"].startswith("client certificate"))
    assert line["status"] == "warn"
    assert "TTFT error p99 3 ms > 1 ms" in line["text"]
    assert "the error is not the load's CPU demand" in line["text"]


def test_no_certificate_no_line(make_run: RunFactory) -> None:
    assert not [c for c in checks(make_run()) if "certificate" in c["text"]]


def test_the_line_is_escaped_in_the_page(make_run: RunFactory, tmp_path: Path) -> None:
    doc = certificate(ttft_p99=3.0)
    doc["verdict"]["reasons"] = ["<script>alert(1)</script>"]
    run_dir = with_certificate(make_run, tmp_path, doc)
    html = build_report(run_dir).read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["client_certificate"]["schema"] == "zerohop.selfcheck"
