"""The answers section in real headless Chromium: no console errors, its figures and a
hostile prompt shown as text, its link in the page's navigation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chromium import open_page
from tests.report.test_answers_section import run_with_answers
from tests.synthetic_runs import HOSTILE
from zerohop.report.build import build_report

pytestmark = pytest.mark.browser


def test_the_answers_section_in_chromium(tmp_path: Path) -> None:
    page_path = build_report(run_with_answers(tmp_path, changed=2, of=5))
    with open_page(page_path, warnings=True) as (page, events):
        text = page.inner_text("#answers")
        linked = page.evaluate("document.querySelectorAll('a[href=\"#answers\"]').length")
        page.screenshot(path=str(tmp_path / "answers.png"), full_page=True)
    assert events.errors == [] and events.dialogs == []
    assert "2 of 5 changed (40.0 %" in text and "What it cannot tell apart" in text
    assert HOSTILE[:20] in text  # the prompt, cut to 60 characters, as text
    assert linked >= 1
