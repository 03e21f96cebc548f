"""A run is loaded and analysed once at its end: the console summary, summary.json and
the report are drawn from that one analysis (`report.build.write_report`), and the
page is the one `zerohop report` writes from the same folder."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import zerohop.analysis.run_analysis as run_analysis
import zerohop.report.build as report_build
import zerohop.storage.run_reader as run_reader
from tests.run_fixtures import RunFactory
from zerohop.cli.simulate import simulate_command
from zerohop.core.layout import REPORT_FILE
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import _finish

pytestmark = pytest.mark.unit

STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")  # the page's "generated at"


def _spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Path]]:
    """Count every load and analysis of a run folder, wherever it is called from (every
    zerohop module that bound the functions' names)."""
    calls: dict[str, list[Path]] = {"load": [], "analyse": []}
    real_load, real_analyse = run_reader.load_run, run_analysis.analyse_run

    def load(run_dir: Path) -> Any:
        calls["load"].append(Path(run_dir))
        return real_load(run_dir)

    def analyse(run: Any, settings: Any = None) -> Any:
        calls["analyse"].append(run.run_dir)
        return real_analyse(run, settings)

    import zerohop.runner.console_summary
    import zerohop.storage.summary_file  # noqa: F401  (bound their own names at import)

    for name, module in list(sys.modules.items()):
        if name.startswith("zerohop."):
            for attribute, real, spy in (("load_run", real_load, load),
                                         ("analyse_run", real_analyse, analyse)):
                if getattr(module, attribute, None) is real:
                    monkeypatch.setattr(module, attribute, spy)
    return calls


def test_the_end_of_a_run_analyses_once_and_reports_from_it(
        make_run: RunFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = make_run(n_requests=400, name="once")
    run_dir = Path(shutil.copytree(made, tmp_path / "run"))
    standalone = Path(shutil.copytree(made, tmp_path / "standalone"))
    plan = RunPlan(host="http://127.0.0.1:9", api="openai-chat", workloads=[], classes=[],
                   users=8, rate=None, duration_s=120, telemetry="none", slo={}, name="once",
                   workers=0, results_dir=tmp_path, seed=1)
    calls = _spy(monkeypatch)
    result = _finish(plan, run_dir, 0)
    assert calls == {"load": [run_dir], "analyse": [run_dir]}, calls
    assert result.report == run_dir / REPORT_FILE and (run_dir / "summary.json").is_file()

    # the same page as `zerohop report` of the folder as the run's end found it
    again = report_build.build_report(standalone)
    assert len(calls["analyse"]) == 2  # the standalone report analyses once too
    page, expected = (STAMP.sub("", p.read_text(encoding="utf-8")) for p in (result.report,
                                                                            again))
    assert page.replace("standalone", "run") == expected.replace("standalone", "run")


def test_a_simulated_run_is_analysed_once(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text("kind: short_query_flood\nname: f\nmax_tokens: 4\n"
                        "load: {kind: open, rate_rps: 5}\n")
    calls = _spy(monkeypatch)
    result = CliRunner().invoke(simulate_command, [
        "--workload", str(workload), "--duration", "5s", "--results-dir",
        str(tmp_path / "r"), "--report"])
    assert result.exit_code == 0, result.output
    [run_dir] = (tmp_path / "r").iterdir()
    assert calls == {"load": [run_dir], "analyse": [run_dir]}, calls
    assert (run_dir / REPORT_FILE).is_file() and (run_dir / "summary.json").is_file()
