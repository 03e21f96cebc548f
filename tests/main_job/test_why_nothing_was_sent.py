"""The cause a run that recorded nothing adds to its one line (`last_error_line`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerohop.runner.locust_process import last_error_line

pytestmark = pytest.mark.unit


def test_the_last_exception_in_the_log_is_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "locust.log"
    log.write_text(
        "[2026-12-01] vm/WARNING/zerohop: something\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ValueError: first\n"
        "Traceback (most recent call last):\n"
        "zerohop.client.api_request.UnfitRequest: workload 'q': token ids on chat\n"
        "Type     Name    # reqs\n"
    )
    assert last_error_line(log) == (
        ": zerohop.client.api_request.UnfitRequest: workload 'q': token ids on chat")


def test_a_log_without_an_exception_adds_nothing(tmp_path: Path) -> None:
    log = tmp_path / "locust.log"
    log.write_text("Type     Name    # reqs\n")
    assert last_error_line(log) == "" and last_error_line(tmp_path / "absent.log") == ""
