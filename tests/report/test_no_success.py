"""The one line `zerohop run` prints when no request succeeded (summary.no_success_reason),
and the report of such a run (an empty run renders instead of failing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from zerohop.analysis.run_analysis import analyse_run
from zerohop.analysis.run_data import TELEMETRY_COLUMNS, RunData, frame_from_rows
from zerohop.report.present import report_page
from zerohop.runner.console_summary import no_success_reason

pytestmark = pytest.mark.unit


def _analysis(rows: list[dict[str, Any]]) -> Any:
    requests, itl = frame_from_rows(rows)
    run = RunData(run_dir=Path("run"), manifest={"run_id": "r", "status": "completed"},
                  requests=requests, itl=itl, telemetry=pd.DataFrame(columns=TELEMETRY_COLUMNS),
                  microbench=None, requests_source="parquet")
    return analyse_run(run)


def _failed(i: int, outcome: str, message: str) -> dict[str, Any]:
    return {"request_id": f"r{i}", "workload": "w", "outcome": outcome,
            "error_message": message, "sent_ts": 100.0 + i, "end_ts": 100.5 + i}


def test_all_failed_names_the_commonest_failure_and_a_message() -> None:
    rows = [_failed(i, "http_500", "boom\non two lines") for i in range(3)]
    rows.append(_failed(3, "timeout_ttft", "slow"))
    line = no_success_reason(_analysis(rows))
    assert line == "no request succeeded: 4 of 4 failed, 3 as http_500: boom on two lines"


def test_one_ok_request_is_success() -> None:
    rows = [_failed(0, "http_500", "boom"), {**_failed(1, "ok", ""), "error_message": None}]
    assert no_success_reason(_analysis(rows)) is None


def test_a_run_without_records_says_nothing_was_sent_and_still_renders() -> None:
    analysis = _analysis([])
    assert no_success_reason(analysis) == (
        "no request was sent (see locust.log in the results folder)")
    page = report_page(analysis, generated_at="now")
    assert page.context["verdict"]["overall"] in ("ok", "warn", "fail")
