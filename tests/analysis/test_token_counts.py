"""The client's token counts beside the server's usage (analysis/latency/token_counts.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from zerohop.analysis.latency.token_counts import summarise_token_counts
from zerohop.analysis.run_data import frame_from_rows
from zerohop.report.present_token_counts import prompt_size_check, token_count_section

pytestmark = pytest.mark.unit


def _row(i: int, *, workload: str = "w", outcome: str = "ok", client: int | None = 10,
         server: int | None = 10, source: str = "usage", asked: int | None = 100,
         prompt: int | None = 100, sized_by: str | None = "usage") -> dict[str, Any]:
    return {
        "request_id": f"r{i}", "workload": workload, "outcome": outcome,
        "counted_output_tokens": client, "output_tokens": server, "token_source": source,
        "target_input_tokens": asked, "input_tokens": prompt,
        "prompt_token_source": sized_by,
    }


def test_output_mismatch_per_request_and_in_total() -> None:
    rows = [
        _row(0),  # agree
        _row(1, server=12),  # the server bills 2 more than the stream delivered
        _row(2, server=12),
        _row(3, server=9),
        _row(4, server=None, source="counted"),  # no usage: nothing to compare
        _row(5, server=50, outcome="stall"),  # a cut stream: not compared
    ]
    frame, _ = frame_from_rows(rows)
    (row,) = summarise_token_counts(frame).rows
    assert row.ok == 5 and row.output_compared == 4
    assert (row.client_output, row.server_output) == (40, 43)
    assert row.output_difference == 3
    assert row.output_difference_pct == pytest.approx(7.5)
    assert row.output_mismatched == 3
    assert dict(row.output_differences) == {0: 1, 2: 2, -1: 1}


def test_input_asked_against_the_servers_count_and_the_flag() -> None:
    rows = [_row(i, prompt=p) for i, p in enumerate((90, 88, 95, 100, 89))]
    rows += [_row(9, workload="exact", prompt=101), _row(10, workload="exact", prompt=99)]
    rows.append(_row(11, workload="exact", prompt=None, sized_by="estimate"))
    frame, _ = frame_from_rows(rows)
    counts = summarise_token_counts(frame)
    by_name = {r.workload: r for r in counts.rows}
    w, exact, everything = by_name["w"], by_name["exact"], by_name["all"]
    assert (w.input_compared, w.asked_input, w.server_input) == (5, 500, 462)
    assert w.input_median_error_pct == pytest.approx(-10.0)
    assert w.input_difference_pct == pytest.approx(-7.6)
    assert exact.input_compared == 2 and exact.input_median_error_pct == pytest.approx(0.0)
    assert exact.input_within_one == 1.0 and w.input_within_one == pytest.approx(0.2)
    assert dict(exact.prompt_sources) == {"usage": 2, "estimate": 1}
    assert everything.ok == 8 and everything.input_compared == 7
    # the promise is ±3 % at the median: only `w` misses it
    assert len(counts.flags) == 1 and counts.flags[0].startswith("w: median prompt size -10.0 %")


def test_no_usage_at_all_gives_dashes_not_errors() -> None:
    rows = [_row(i, server=None, source="counted", prompt=None, sized_by="estimate")
            for i in range(3)]
    frame, _ = frame_from_rows(rows)
    counts = summarise_token_counts(frame)
    (row,) = counts.rows
    assert row.output_compared == 0 and row.input_compared == 0
    assert math.isnan(row.input_median_error_pct) and not counts.flags
    section = token_count_section(counts)
    assert section is not None
    (shown,) = section["rows"]  # type: ignore[index]
    assert shown["output_difference"] == "—" and shown["input_median"] == "—"
    assert shown["sources"] == "estimate 3"


def test_a_run_without_an_ok_request_has_no_section() -> None:
    frame, _ = frame_from_rows([_row(0, outcome="http_500")])
    assert token_count_section(summarise_token_counts(frame)) is None


def test_the_verdict_flags_a_median_prompt_size_past_3_percent() -> None:
    close = [_row(i, prompt=p, sized_by="tokenize") for i, p in enumerate((100, 100, 101))]
    frame, _ = frame_from_rows(close)
    line = prompt_size_check(summarise_token_counts(frame))
    assert line == {"status": "ok", "text": "prompt sizes: median within ±3 % of the asked "
                                            "size, 100.0 % of requests within ±1 token"}
    off = close + [_row(i, workload="long", prompt=104) for i in range(5, 8)]
    frame, _ = frame_from_rows(off)
    line = prompt_size_check(summarise_token_counts(frame))
    assert line is not None and line["status"] == "warn"
    assert line["text"] == ("prompt sizes off: long: median prompt size +4.0 % off the asked "
                            "size (more than ±3 %)")
    frame, _ = frame_from_rows([_row(0, prompt=None)])
    assert prompt_size_check(summarise_token_counts(frame)) is None


def test_clamped_requests_are_counted_and_said_in_the_verdict() -> None:
    rows = [_row(i, asked=4, prompt=11) | {"prompt_clamped": True} for i in range(3)]
    rows += [_row(i, prompt=100) | {"prompt_clamped": False} for i in range(3, 20)]
    rows.append(_row(20, outcome="stall") | {"prompt_clamped": True})  # not ok: not counted
    frame, _ = frame_from_rows(rows)
    counts = summarise_token_counts(frame)
    (row,) = counts.rows
    assert row.clamped == 3
    check = prompt_size_check(counts)
    assert check is not None and "3 asked a size the target cannot make" in check["text"]
    section = token_count_section(counts)
    assert section is not None and section["rows"][0]["clamped"] == "3"  # type: ignore[index]


def test_no_clamped_request_says_nothing_of_clamping() -> None:
    frame, _ = frame_from_rows([_row(i) for i in range(5)])
    check = prompt_size_check(summarise_token_counts(frame))
    assert check is not None and "clamped" not in check["text"]


def test_image_tokens_are_asked_beside_the_text_and_shown_only_when_sent() -> None:
    rows = [_row(i, asked=100, prompt=100 + 1369) for i in range(3)]
    for row in rows:
        row["image_tokens"] = 1369
    rows += [_row(5, workload="plain", asked=100, prompt=100)]
    frame, _ = frame_from_rows(rows)
    counts = summarise_token_counts(frame)
    by_name = {r.workload: r for r in counts.rows}
    pictures, plain = by_name["w"], by_name["plain"]
    assert (pictures.asked_input, pictures.asked_image, pictures.server_input) == (
        3 * 1469, 3 * 1369, 3 * 1469)
    assert pictures.input_median_error_pct == 0.0 and not counts.flags
    assert plain.asked_image == 0 and plain.asked_input == 100
    section = token_count_section(counts)
    assert section is not None and section["images"] is True
    shown = {row["workload"]: row for row in section["rows"]}  # type: ignore[attr-defined]
    assert (shown["w"]["asked_text"], shown["w"]["asked_image"]) == ("300", "4,107")
    without, _ = frame_from_rows([_row(i) for i in range(3)])
    section = token_count_section(summarise_token_counts(without))
    assert section is not None and section["images"] is False
