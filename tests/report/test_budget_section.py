"""The time budget on the page: one bar per workload whose segments add up to the
band, its texts escaped."""

from __future__ import annotations

import pytest

from tests.analysis.test_time_budget import _planted
from tests.synthetic_runs import HOSTILE
from zerohop.analysis.server.time_budget import (
    NOT_RESOLVABLE,
    BudgetBand,
    BudgetPart,
    TimeBudget,
    WorkloadBudget,
    time_budget,
)
from zerohop.report.present_budget import budget_section
from zerohop.report.render import _environment, templates_dir

pytestmark = pytest.mark.unit


def test_one_bar_per_workload_whose_segments_fill_it_and_whose_texts_are_escaped() -> None:
    requests, telemetry, _, _ = _planted()
    requests["workload"] = requests["workload"].replace({"chat": HOSTILE})
    section = budget_section(time_budget(requests, telemetry))
    assert section is not None
    assert [row["workload"] for row in section["workloads"]] == [HOSTILE, "rag"]
    for row in section["workloads"]:
        assert row["caption"].startswith("TTFT around p99:")
        widths = [seg["width"] for seg in row["segments"]]
        assert sum(widths) == pytest.approx(100.0, abs=0.01)
        queue = next(seg for seg in row["segments"] if seg["label"] == "queue")
        assert "aggregate" in queue["text"] and "n=" in queue["text"]
        assert {band["metric"] for band in row["table"]} == {"TTFT", "E2E"}
        assert row["parts"][-1]["text"].startswith("unexplained ")  # shown even below 0
    html = _environment(str(templates_dir())).get_template("_time_budget.html.j2").render(
        budget=section)
    assert HOSTILE not in html and "&lt;script&gt;" in html
    assert html.count('class="zh-budget-bar"') == 2


def test_no_section_without_a_band() -> None:
    requests, telemetry, _, _ = _planted()
    assert budget_section(time_budget(requests.iloc[:2], telemetry)) is None
    assert budget_section(None) is None


def test_a_part_wider_than_half_its_band_is_named_not_resolvable_not_given_a_figure(
) -> None:
    wide = BudgetPart("queue", 123.4, 0.0, 300.0, 10, "vllm:q (histogram)", True, False)
    prefill = BudgetPart("prefill", 250.0, 240.0, 260.0, 10, "vllm:p (histogram)", True)
    rest = BudgetPart("unexplained", 26.6, 0.0, 30.0, 10, "rest", True)
    band = BudgetBand("p99", "ttft_ms", 10, 400.0, [wide, prefill, rest], noise_ms=1.5)
    section = budget_section(TimeBudget([WorkloadBudget("chat", [band], "layer")]))
    assert section is not None
    [row] = section["workloads"]
    assert row["workload"] == "chat · arm layer"
    queue_text = row["parts"][0]["text"]
    assert queue_text.startswith(f"queue: {NOT_RESOLVABLE}") and "123" not in queue_text
    assert "clock noise ±1.50 ms" in row["caption"]
    segments = [(seg["label"], seg["width"]) for seg in row["segments"]]
    # drawn: prefill's 250 of 400 ms; the rest (queue unresolved + unexplained) grey
    assert segments == [("prefill", pytest.approx(62.5)),
                        ("not resolvable or unexplained", pytest.approx(37.5))]
    assert "queue (" + NOT_RESOLVABLE in row["segments"][1]["text"]
