"""Image inputs through real Locust against the embedded target: workloads with images
on chat and Anthropic beside one without on Responses, in one run; each record's asked
image tokens are exactly what the server's prompt usage adds to the text's, and the
report's token counts show them in their own columns (read in Chromium too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.chromium import open_page
from zerohop.core.images import image_token_count

WORKLOADS = """
workloads:
  - kind: short_query_flood
    name: pictures
    api: openai-chat
    input_tokens: {type: uniform, min: 16, max: 64}
    max_tokens: 8
    images: {count: {type: uniform, min: 1, max: 3}, width: {type: uniform, min: 100, max: 400},
             height: 200}
    load: {kind: closed, users: 2}
  - kind: conversation
    name: album
    api: anthropic
    source: {type: synthetic, turns: 2, user_tokens: 24, answer_tokens: 8}
    images: {width: 512, height: 512}
    load: {kind: closed, users: 1}
  - kind: short_query_flood
    name: words
    api: openai-responses
    input_tokens: {type: uniform, min: 16, max: 64}
    max_tokens: 8
    load: {kind: closed, users: 1}
"""


@pytest.fixture(scope="module")
def image_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of WORKLOADS on the embedded target: its results folder."""
    tmp_path = tmp_path_factory.mktemp("images")
    workloads = tmp_path / "images.yaml"
    workloads.write_text(WORKLOADS)
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--workload", str(workloads),
         "--duration", "6s", "--telemetry", "none", "--microbench", "off",
         "--results-dir", str(tmp_path / "results"), "--name", "images"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    (run,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    return run


@pytest.mark.integration
def test_asked_image_tokens_equal_the_servers_extra_prompt_tokens(image_run: Path) -> None:
    run = image_run
    frame = pd.read_parquet(run / "requests.parquet")
    assert (frame["outcome"] == "ok").all(), frame["outcome"].value_counts()
    assert set(frame["workload"]) == {"pictures", "album", "words"}
    words = frame[frame["workload"] == "words"]
    assert words["images"].isna().all() and words["image_tokens"].isna().all()
    assert (words["input_tokens"] == words["target_input_tokens"]).all()
    pictures = frame[frame["workload"] == "pictures"]
    assert len(pictures) >= 5 and set(pictures["images"]) <= {1, 2, 3}
    assert pictures["image_tokens"].nunique() > 1  # sizes and counts are drawn
    assert (pictures["image_tokens"] >= pictures["images"] * image_token_count(100, 200)).all()
    album = frame[frame["workload"] == "album"]
    assert len(album) >= 2 and (album["image_tokens"] == image_token_count(512, 512)).all()
    pictured = frame[frame["workload"] != "words"]
    extra = pictured["input_tokens"] - pictured["target_input_tokens"]
    assert (extra == pictured["image_tokens"]).all(), pictured[
        ["workload", "input_tokens", "target_input_tokens", "image_tokens"]].head()
    page = (run / "report.html").read_text()
    assert "asked images" in page and "asked text" in page


@pytest.mark.browser
def test_the_report_shows_the_asked_image_tokens_in_chromium(image_run: Path) -> None:
    with open_page(image_run / "report.html") as (page, events):
        table = page.locator("#token-counts table").nth(1)
        headers = table.locator("thead th").all_text_contents()
        rows = {cells[0]: dict(zip(headers, cells, strict=True)) for cells in (
            row.locator("td").all_text_contents() for row in table.locator("tbody tr").all())}
        assert not events.errors
    assert headers[2:5] == ["asked text", "asked images", "asked"]
    assert rows["words"]["asked images"] == "0"
    for name in ("pictures", "album"):
        asked = int(rows[name]["asked"].replace(",", ""))
        text = int(rows[name]["asked text"].replace(",", ""))
        images = int(rows[name]["asked images"].replace(",", ""))
        assert images > 0 and asked == text + images
        assert rows[name]["asked"] == rows[name]["server"]
