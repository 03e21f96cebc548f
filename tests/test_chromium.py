"""The browser tier's one way of finding Chromium, and ZEROHOP_REQUIRE_BROWSER=1 turning
a missing browser from a skip into a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import chromium

pytestmark = pytest.mark.unit


def fake_binary(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(chromium, "FALLBACK", tmp_path / "absent" / "chromium")


def test_path_chromium_then_chromium_browser_then_the_fallback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    browser = fake_binary(second, "chromium-browser")
    monkeypatch.setenv("PATH", f"{first}:{second}")
    fallback = fake_binary(tmp_path / "usr-bin", "chromium")
    monkeypatch.setattr(chromium, "FALLBACK", fallback)
    assert chromium.find_chromium() == browser
    plain = fake_binary(first, "chromium")
    assert chromium.find_chromium() == plain
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert chromium.find_chromium() == fallback


@pytest.mark.usefixtures("no_fallback")
def test_missing_chromium_skips_by_default(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(chromium.REQUIRE_ENV, raising=False)
    assert chromium.find_chromium() is None
    with pytest.raises(pytest.skip.Exception, match="Chromium not found"):
        chromium.require_chromium()


@pytest.mark.usefixtures("no_fallback")
def test_missing_chromium_fails_when_the_browser_is_required(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv(chromium.REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="ZEROHOP_REQUIRE_BROWSER=1 but Chromium"):
        chromium.require_chromium()


def test_a_chart_is_blank_below_the_ink_threshold() -> None:
    ink = {"chart-a": chromium.MIN_CHART_INK, "chart-b": chromium.MIN_CHART_INK - 1, "c": 0}
    assert chromium.blank_charts(ink) == {"chart-b": chromium.MIN_CHART_INK - 1, "c": 0}
