"""`zerohop report` / `zerohop compare`: success output, and bad input as one line
with exit 2 and no traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.run_fixtures import RunFactory
from zerohop.cli import cli
from zerohop.report.report_commands import compare_command, report_command


def _bad(result: object, fragment: str) -> None:
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    lines = result.output.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("zerohop: error: ") and fragment in lines[0]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]


@pytest.mark.unit
def test_report_writes_the_page(make_run: RunFactory, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(
        report_command,
        [
            str(make_run(n_requests=500)),
            "-o",
            str(out),
            "--window",
            "5",
            "--alert",
            "gpu_temp_c > 10 for 5s",
        ],
    )
    assert result.exit_code == 0, result.output
    assert out.is_file() and "report written" in result.output
    html = out.read_text()
    assert "gpu_temp_c &gt; 10 for 5s" in html and "fired" in html


@pytest.mark.unit
def test_report_of_a_folder_without_summary_json_writes_it(make_run: RunFactory) -> None:
    """A folder Locust wrote alone (headless `locust -f loadtests/`) has records and a
    manifest but no summary.json: `zerohop report DIR` writes it, from the same figures."""
    import json

    import pandas as pd

    run_dir = make_run(n_requests=300)
    (run_dir / "summary.json").unlink(missing_ok=True)
    result = CliRunner().invoke(report_command, [str(run_dir)])
    assert result.exit_code == 0, result.output
    assert str(run_dir / "summary.json") in result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    records = pd.read_parquet(run_dir / "requests.parquet")
    assert summary["total"]["requests"] == len(records)
    assert summary["total"]["ok"] == int((records["outcome"] == "ok").sum())


@pytest.mark.unit
def test_report_reads_jsonl_sinks_of_a_killed_run(make_run: RunFactory, tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    shutil.copytree(make_run(n_requests=300, sinks_only=True), run_dir)
    result = CliRunner().invoke(report_command, [str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "requests.parquet missing" in (run_dir / "report.html").read_text()


@pytest.mark.unit
def test_report_bad_input(make_run: RunFactory, tmp_path: Path) -> None:
    runner = CliRunner()
    _bad(runner.invoke(report_command, [str(tmp_path / "missing")]), "results folder not found")
    broken = tmp_path / "broken"
    shutil.copytree(make_run(n_requests=50), broken)
    (broken / "manifest.json").write_text("{")
    _bad(runner.invoke(report_command, [str(broken)]), "malformed manifest")
    good = make_run(n_requests=50)
    _bad(runner.invoke(report_command, [str(good), "--alert", "gpu_temp_c >> 3"]), "alert rule")
    _bad(runner.invoke(report_command, [str(good), "--window", "0"]), "window must be > 0")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "manifest.json").write_text((good / "manifest.json").read_text())
    _bad(runner.invoke(report_command, [str(empty)]), "no requests.parquet")


@pytest.mark.unit
def test_compare_verdicts_and_fail_on_worse(make_run: RunFactory, tmp_path: Path) -> None:
    runner = CliRunner()
    base = str(make_run(noise_seed=1, name="base"))
    again = str(make_run(noise_seed=2, name="again"))
    slower = str(make_run(noise_seed=2, tpot_scale=1.2, name="slower"))
    same = runner.invoke(
        compare_command, [base, again, "-o", str(tmp_path / "same.html"), "--fail-on-worse"]
    )
    assert same.exit_code == 0, same.output
    assert "TPOT within noise" in same.output
    worse = runner.invoke(
        compare_command, [base, slower, "-o", str(tmp_path / "worse.html"), "--fail-on-worse"]
    )
    assert worse.exit_code == 1, worse.output
    assert "TPOT worse" in worse.output and (tmp_path / "worse.html").is_file()


@pytest.mark.unit
def test_compare_bad_input(make_run: RunFactory, tmp_path: Path) -> None:
    runner = CliRunner()
    base = str(make_run(noise_seed=1, name="base"))
    _bad(runner.invoke(compare_command, [base]), "at least two")
    _bad(runner.invoke(compare_command, [base, str(tmp_path / "nope")]), "not found")
    _bad(
        runner.invoke(compare_command, [base, base, "--layer-of", str(tmp_path)]),
        "is not one of the compared folders",
    )


@pytest.mark.unit
def test_subcommands_are_registered_in_the_zerohop_group() -> None:
    runner = CliRunner()
    assert "report" in runner.invoke(cli, ["--help"]).output
    assert runner.invoke(cli, ["report", "--help"]).exit_code == 0
    assert "--layer-of" in runner.invoke(cli, ["compare", "--help"]).output


@pytest.mark.integration
def test_real_process_exit_code_and_stderr(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "zerohop", "report", str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("zerohop: error: results folder not found")
    assert "Traceback" not in done.stderr


@pytest.mark.unit
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_pages_follow_the_umask_and_compare_lands_next_to_its_data(
        make_run: RunFactory, tmp_path: Path, umask: int, mode: int) -> None:
    base, candidate = tmp_path / "base", tmp_path / "candidate"
    shutil.copytree(make_run(noise_seed=1, name="base"), base)
    shutil.copytree(make_run(noise_seed=2, name="again"), candidate)
    runner = CliRunner()
    previous = os.umask(umask)
    try:
        with runner.isolated_filesystem(temp_dir=tmp_path) as cwd:
            assert runner.invoke(report_command, [str(candidate)]).exit_code == 0
            compared = runner.invoke(compare_command, [str(base), str(candidate)])
            assert compared.exit_code == 0, compared.output
            assert not list(Path(cwd).iterdir())  # nothing in the current folder
    finally:
        os.umask(previous)
    for page in (candidate / "report.html", candidate / "compare.html"):
        assert page.stat().st_mode & 0o777 == mode, (page, oct(page.stat().st_mode))
