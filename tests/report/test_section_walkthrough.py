"""docs/architecture.md's "Adding a report section", followed: a toy section written as
two files outside the package (its module: analysis, presenter and `register_section`;
its template block) appears on the page of a run, in its place, escaped, computed by the
run's one analysis — with no edit of `RunAnalysis`, `present.py` or `report.html.j2`.
(integration) Shipped as a plugin through the `zerohop.plugins` entry-point group (a
dist-info folder beside it), it is on the page `zerohop run` writes, with no flag."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run_fixtures import RunFactory
from tests.synthetic_runs import HOSTILE
from zerohop.analysis.run_analysis import analyse_run, section_analysis
from zerohop.report.build import write_report
from zerohop.report.present import report_page
from zerohop.report.sections import (
    ReportSection,
    register_section,
    registered_sections,
    unregister_section,
)
from zerohop.storage.run_reader import load_run

REPO = Path(__file__).resolve().parents[2]

TOY_MODULE = '''"""A toy report section: the attempts that failed and their messages."""

from pathlib import Path

from zerohop.report.sections import ReportSection, register_section


def analyse(run, inputs):
    if run.requests.empty:
        return None
    failed = run.requests[run.requests["outcome"] != "ok"]
    return {"attempts": len(run.requests), "failed": len(failed),
            "messages": sorted(set(failed["error_message"].dropna()))}


def present(figures, analysis, charts):
    if figures is None:
        return None
    return {"attempts": f"{figures['attempts']:,}", "failed": f"{figures['failed']:,}",
            "messages": figures["messages"]}


register_section(ReportSection(
    name="toy", analyse=analyse, present=present,
    template=Path(__file__).with_name("toy.html.j2"),
    place="body", order=25, anchor="toy", nav="Toy failures"))
'''

TOY_TEMPLATE = '''<section id="toy">
  <h2>Toy: failed attempts</h2>
  <p id="toy-figure">{{ toy.failed }} of {{ toy.attempts }} attempts failed, their messages:</p>
  <ul>{% for message in toy.messages %}<li><code>{{ message }}</code></li>{% endfor %}</ul>
</section>
'''


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture
def toy_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "toy_section"
    folder.mkdir()
    yield folder
    unregister_section("toy")
    sys.modules.pop("toy_section", None)


@pytest.mark.unit
def test_a_toy_section_in_two_files_shows_on_the_page_in_its_place(
        toy_dir: Path, tmp_path: Path, hostile_run: Path) -> None:
    shipped = {name: _tree(REPO / name) for name in ("src", "report_templates")}
    (toy_dir / "toy_section.py").write_text(TOY_MODULE, encoding="utf-8")
    (toy_dir / "toy.html.j2").write_text(TOY_TEMPLATE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("toy_section", toy_dir / "toy_section.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["toy_section"] = module
    spec.loader.exec_module(module)  # registers the section

    run = load_run(hostile_run)
    failed = run.requests[run.requests["outcome"] != "ok"]
    expected_failed = len(failed)
    messages = sorted(set(failed["error_message"].dropna()))
    assert expected_failed and HOSTILE in messages
    analysis = analyse_run(run)  # what `zerohop run` does at the end of a run
    assert analysis.sections["toy"] == {"attempts": len(run.requests),
                                        "failed": expected_failed, "messages": messages}
    html = write_report(analysis, tmp_path / "out" / "report.html").read_text(encoding="utf-8")

    # the figure, escaped, in the body between "Prefill" and "Errors" (order 25: after
    # the policy section's place, before the token counts), its link in the navigation
    assert html.count(f'<p id="toy-figure">{expected_failed:,} of {len(run.requests):,} '
                      "attempts failed, their messages") == 1
    section = html[html.index('<section id="toy">'):]
    section = section[:section.index("</section>")]
    assert "<li><code>&lt;script&gt;alert(1)&lt;/script&gt;</code></li>" in section
    assert section.count("<li>") == len(messages)
    assert HOSTILE not in html
    at = html.index('<section id="toy">')
    assert html.index('<section id="prefill">') < at < html.index('<section id="token-counts">')
    assert at < html.index('<section id="errors">')
    nav = html[html.index('<nav class="zh-nav">'):html.index("</nav>")]
    assert nav.index('href="#prefill"') < nav.index('<a href="#toy">Toy failures</a>') \
        < nav.index('href="#errors"')

    # the walkthrough's cost: two files, none of them in the package or its templates
    written = sorted(p.name for p in toy_dir.iterdir() if p.is_file())
    assert written == ["toy.html.j2", "toy_section.py"] and len(written) <= 3
    assert {name: _tree(REPO / name) for name in shipped} == shipped


@pytest.mark.unit
def test_a_section_whose_presenter_gives_nothing_is_left_out_with_its_link(
        toy_dir: Path, make_run: RunFactory) -> None:
    (toy_dir / "empty.html.j2").write_text('<section id="empty">{{ empty }}</section>')
    register_section(ReportSection(
        name="toy", analyse=lambda run, inputs: len(run.requests),
        present=lambda n, analysis, charts: None, template=toy_dir / "empty.html.j2",
        place="closing", order=1, anchor="empty", nav="Empty"))
    analysis = analyse_run(load_run(make_run()))
    assert analysis.sections["toy"] == 3000
    page = report_page(analysis, "now")
    assert page.context["toy"] is None
    assert [s["name"] for s in page.context["sections"]["closing"]] == ["microbench"]


@pytest.mark.unit
def test_the_registry_refuses_what_the_page_could_not_show(toy_dir: Path) -> None:
    def entry(**fields: object) -> ReportSection:
        base: dict[str, object] = dict(name="toy", analyse=lambda run, inputs: 1,
                                       present=lambda f, a, c: {"x": f},
                                       template="toy.html.j2", place="body", order=1)
        return ReportSection(**{**base, **fields})  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="place 'footer'"):
        register_section(entry(place="footer"))
    with pytest.raises(ValueError, match="variable"):
        register_section(entry(name="no-dash"))
    with pytest.raises(ValueError, match="already registered"):
        register_section(entry(name="policy"))
    with pytest.raises(ValueError, match="no analysis"):
        register_section(entry(analyse=None))
    assert section_analysis("toy") is None  # nothing half-registered


@pytest.mark.unit
def test_the_built_in_sections_and_their_places() -> None:
    assert [(s.name, s.place) for s in registered_sections()] == [
        ("saturation", "headline"), ("budget", "headline"), ("pd_split", "headline"),
        ("adapters", "body"),
        ("policy", "body"), ("token_counts", "body"), ("sessions", "body"), ("spec_decode", "body"),
        ("energy", "body"), ("probe", "body"), ("answers", "body"),
        ("microbench", "closing")]
    for section in registered_sections():
        assert section_analysis(section.name) is not None
        assert (REPO / "report_templates" / str(section.template)).is_file()


@pytest.fixture(scope="module")
def entry_point_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One cold `zerohop run` with the toy section installed as an entry point of
    `zerohop.plugins` (its two files and a dist-info folder on PYTHONPATH, no --plugin):
    (its results folder, its output)."""
    root = tmp_path_factory.mktemp("toy_section_plugin")
    site = root / "site"
    (site / "toy_section-1.0.dist-info").mkdir(parents=True)
    (site / "toy_section.py").write_text(TOY_MODULE, encoding="utf-8")
    (site / "toy.html.j2").write_text(TOY_TEMPLATE, encoding="utf-8")
    (site / "toy_section-1.0.dist-info" / "entry_points.txt").write_text(
        "[zerohop.plugins]\ntoy = toy_section\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
           "PYTHONUNBUFFERED": "1"}
    env.pop("ZEROHOP_PLUGINS", None)
    results = root / "results"
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--only", "ShortQueryFlood", "--requests",
         "6", "--telemetry", "none", "--microbench", "off", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=180, cwd=root, env=env)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    return run, res.stdout + res.stderr


@pytest.mark.integration  # `zerohop run` cold: Locust and the embedded target as processes
def test_an_entry_point_section_is_on_the_page_zerohop_run_writes(
        entry_point_run: tuple[Path, str]) -> None:
    import pandas as pd

    run, output = entry_point_run
    assert "Traceback" not in output
    frame = pd.read_parquet(run / "requests.parquet")
    attempts, failed = len(frame), int((frame["outcome"] != "ok").sum())
    assert attempts >= 6
    html = (run / "report.html").read_text(encoding="utf-8")
    assert html.count(f'<p id="toy-figure">{failed:,} of {attempts:,} attempts failed') == 1
    nav = html[html.index('<nav class="zh-nav">'):html.index("</nav>")]
    assert '<a href="#toy">Toy failures</a>' in nav
