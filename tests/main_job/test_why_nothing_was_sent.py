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


@pytest.mark.parametrize(("locust_code", "exit_code"), [(1, 4), (130, 130)])
def test_a_run_with_no_record_at_all_ends_in_one_line_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], locust_code: int,
        exit_code: int) -> None:
    """Locust failed before its first request (no records/ at all): the folder's
    manifest is finished and the console gets one line with the cause, exit 4 (or the
    signal's code when the run was stopped)."""
    from zerohop.analysis.run_data import ReportInputError
    from zerohop.runner.run_once import _nothing_recorded
    from zerohop.storage import run_folder

    run_dir = run_folder.new_run_dir(tmp_path, "run")
    run_folder.start_manifest(run_dir, name="run")
    (run_dir / "locust.log").write_text(
        "Traceback (most recent call last):\nOSError: [Errno 24] Too many open files\n")
    result = _nothing_recorded(run_dir, locust_code, ReportInputError("nothing to report"))
    err = capsys.readouterr().err
    assert result.exit_code == exit_code and result.report is None
    assert err.splitlines() == [
        "zerohop: no request was recorded (nothing to report): "
        "OSError: [Errno 24] Too many open files"]
    assert run_folder.read_manifest(run_dir)["status"] == "completed"
