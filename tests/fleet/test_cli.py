"""`zerohop simulate`'s bad input: one line, exit 2, nothing written; and a good run's
folder is one `zerohop report` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.run_fixtures import read_summary
from zerohop.cli.simulate import simulate_command
from zerohop.core.exit_codes import EXIT_BAD_INPUT

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

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
    (CLOSED, [], ["'c'", "closed load", "open load", "w.yaml"]),
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


def test_a_shipped_closed_workload_is_refused_for_what_it_is(tmp_path: Path) -> None:
    """long_context is a kind the virtual clock runs: the refusal names the closed load,
    never the kind, as the reason."""
    result = CliRunner().invoke(simulate_command, [
        "--workload", str(REPO / "workloads" / "long_context.yaml"),
        "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    line = result.output.strip()
    assert "closed load" in line and "long_context workloads only" not in line, line


def _simulate(tmp_path: Path, workload: str, *flags: str) -> tuple[str, Path]:
    path = tmp_path / "w.yaml"
    path.write_text(workload)
    result = CliRunner().invoke(simulate_command, [
        "--workload", str(path), "--results-dir", str(tmp_path / "r"), "--report", *flags])
    assert result.exit_code == 0, result.output
    [run_dir] = (tmp_path / "r").iterdir()
    return result.output, run_dir


def test_the_workloads_slo_is_judged_and_saturation_said(tmp_path: Path) -> None:
    """An overload of one replica: the file's SLO is judged (console and report), the
    saturation is said, the modelled tensor activity stays a possible share, and the
    report gives no client-fidelity verdict for a run that had no client."""
    overload = OPEN.replace("rate_rps: 5", "rate_rps: 5000") + "slo: {ttft_p99_ms: 500}\n"
    out, run_dir = _simulate(tmp_path, overload, "--duration", "3s")
    assert "SLO f: ttft_p99_ms ≤ 500 ms" in out and "MISSED" in out, out
    assert "warning: the 1 replica saturated at" in out, out
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["workload_slo"] == {"f": {"ttft_p99_ms": 500.0}}
    assert manifest["simulation"]["peak"]["gpu_tensor_active_pct"] <= 100.0
    html = (run_dir / "report.html").read_text()
    assert "SLOs: 0 of 1 met" in html and "none set" not in html
    first_screen = html.split('id="summary"')[0]
    assert "1 replica saturated at" in first_screen and "client fidelity" not in first_screen


def test_a_light_load_is_not_called_saturated(tmp_path: Path) -> None:
    out, run_dir = _simulate(tmp_path, OPEN + "slo: {ttft_p99_ms: 5000}\n",
                             "--duration", "5s")
    assert "saturated" not in out and "— met" in out, out
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["simulation"]["saturation"] is None


def test_tensor_activity_carries_what_exceeds_a_tick() -> None:
    """A step scheduled near a tick's end counts its FLOPs at once: what exceeds the
    tick's capacity moves to the next tick, the total kept."""
    from zerohop.fleet.telemetry import FleetTelemetry

    telemetry = FleetTelemetry(0.0, int(1e9))
    readings = [telemetry._tensor_active_pct(total, 1) for total in (1.6, 1.6, 2.0)]
    assert readings == pytest.approx([100.0, 60.0, 40.0])
