"""`zerohop simulate`'s bad input: one line, exit 2, nothing written; and a good run's
folder is one `zerohop report` reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from zerohop.cli.simulate import simulate_command
from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.storage.summary_file import read_summary

pytestmark = pytest.mark.unit

OPEN = "kind: short_query_flood\nname: f\nmax_tokens: 4\nload: {kind: open, rate_rps: 5}\n"
CLOSED = "kind: short_query_flood\nname: c\nload: {kind: closed, users: 2}\n"


@pytest.mark.parametrize(("workload", "flags", "words"), [
    (OPEN, ["--layer", "cpu_ms=1,bogus=2"], ["--layer", "bogus", "fields:"]),
    (OPEN, ["--layer", "cores=0"], ["--layer", "cores"]),
    (OPEN, ["--layer", "cpu_ms"], ["key=value"]),
    (OPEN, ["--replicas", "0"], ["--replicas"]),
    (OPEN, ["--duration", "soon"], ["--duration"]),
    (OPEN, ["--record-sample", "0"], ["--record-sample"]),
    (OPEN, ["--sweep", "5,fast"], ["--sweep", "'fast'"]),
    (OPEN, ["--sweep", "5,10", "--simulated-replicas", "1"], ["--sweep", "--simulated"]),
    (OPEN, ["--simulated-replicas", "1", "--layer", "on"], ["couples"]),
    (OPEN, ["--replicas", "2", "--simulated-replicas", "3"], ["--simulated-replicas"]),
    (CLOSED, [], ["open-loop", "'c'"]),
    ("kind: nope\n", [], ["kind"]),
    (None, [], ["no such file"]),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, workload: str | None,
                                          flags: list[str], words: list[str]) -> None:
    path = tmp_path / "w.yaml"
    if workload is not None:
        path.write_text(workload)
    result = CliRunner().invoke(simulate_command, [
        "--workload", str(path), "--results-dir", str(tmp_path / "r"), *flags])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zerohop: error:"), result.output
    for word in words:
        assert word in lines[0]
    assert not (tmp_path / "r").exists()


def test_a_simulated_run_makes_a_report(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(OPEN)
    result = CliRunner().invoke(simulate_command, [
        "--workload", str(path), "--duration", "10s", "--replicas", "2", "--layer", "on",
        "--results-dir", str(tmp_path / "r"), "--report"])
    assert result.exit_code == 0, result.output
    [run_dir] = (tmp_path / "r").iterdir()
    html = (run_dir / "report.html").read_text()
    assert "layer_cpu_pct" in html and "kv_cache_usage" in html.lower()
    summary = read_summary(run_dir)  # its figures: tests/storage/test_summary_file.py
    assert summary["run"]["simulated"] and summary["run"]["target"]["kind"] == "simulated"
    assert summary["total"]["requests"] > 0 and summary["window"]["duration_s"] == 10.0


def test_a_simulated_sweep_is_one_capacity_plans_from(tmp_path: Path) -> None:
    from zerohop.planning.capacity_cli import capacity_command

    path = tmp_path / "w.yaml"
    path.write_text(OPEN)
    result = CliRunner().invoke(simulate_command, [
        "--workload", str(path), "--duration", "5s", "--sweep", "20,100,400",
        "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    [sweep_dir] = (tmp_path / "r").iterdir()
    assert len([p for p in sweep_dir.iterdir() if (p / "manifest.json").is_file()]) == 3
    plan = CliRunner().invoke(capacity_command, [
        str(sweep_dir), "--slo", "ttft_p99_ms=1000", "--traffic", "50"])
    assert plan.exit_code == 0, plan.output
    assert "replica" in plan.output.lower()
