"""The report's sections as one registry: each entry is a section's analysis, its
presenter, its template block and its place on the page, so adding a section is one
module that calls `register_section` and one template file — no edit of `RunAnalysis`,
`present.py` or `report.html.j2`, which renders the registered sections of each place
in a loop. The page's fixed layout (verdict, summary, time series, drivers,
distributions, prefill, errors, client fidelity, appendix) is not in the registry.

A section's figures are computed once per run by `analyse_run` (into
`RunAnalysis.sections`); its presenter turns them into the template's context, which
the template reads under the section's name. Everything it prints is autoescaped.
From outside the tree, the module that registers is a plugin (`core/plugins.py`): loaded
by the CLI before the run it reports on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from zerohop.analysis.comparison.answers import answers_of_run
from zerohop.analysis.latency.token_counts import TokenCounts
from zerohop.analysis.run_analysis import (
    RunAnalysis,
    SectionAnalysis,
    register_section_analysis,
    section_analysis,
    unregister_section_analysis,
)
from zerohop.report.charts import Chart
from zerohop.report.present_adapters import adapter_rows
from zerohop.report.present_answers import answers_section
from zerohop.report.present_budget import budget_section
from zerohop.report.present_energy import energy_section
from zerohop.report.present_microbench import microbench_section
from zerohop.report.present_pd_split import pd_split_section
from zerohop.report.present_policy import policy_section
from zerohop.report.present_probe import probe_section
from zerohop.report.present_saturation import saturation_section
from zerohop.report.present_sessions import session_section
from zerohop.report.present_spec_decode import spec_decode_section
from zerohop.report.present_token_counts import token_count_section

# where a section goes: inside the verdict (after the headline figures), among the
# body's sections (after "Prefill", before "Errors"), or after "Client fidelity"
PLACES: tuple[str, ...] = ("headline", "body", "closing")

Presenter = Callable[[Any, RunAnalysis, list[Chart]], Any]


@dataclass(frozen=True)
class ReportSection:
    """One report section. `analyse`: its figures from the run, computed once per run
    (None: a built-in whose analysis `analysis/run_analysis.py` registers, so runs
    analysed without the report have it too). `present(figures, analysis, charts)`:
    the template's context (None or empty: the section is left out), appending any
    chart it draws. `template`: a file in `report_templates/`, or the path of a
    template elsewhere. `anchor`/`nav`: its id and the link text in the page's
    navigation (no `nav`: no link)."""

    name: str
    present: Presenter
    template: str | Path
    place: str
    order: int
    analyse: SectionAnalysis | None = None
    anchor: str = ""
    nav: str = ""


_SECTIONS: dict[str, ReportSection] = {}


def register_section(entry: ReportSection) -> ReportSection:
    """Add `entry` to the page (and its analysis to every run's analysis)."""
    if not entry.name.isidentifier() or entry.name == "sections":
        raise ValueError(f"section name {entry.name!r}: the template reads it as a variable")
    if entry.place not in PLACES:
        raise ValueError(f"section {entry.name!r}: place {entry.place!r} is not one of {PLACES}")
    if entry.name in _SECTIONS:
        raise ValueError(f"a report section named {entry.name!r} is already registered")
    if entry.analyse is not None:
        register_section_analysis(entry.name, entry.analyse)
    elif section_analysis(entry.name) is None:
        raise ValueError(f"section {entry.name!r} has no analysis")
    _SECTIONS[entry.name] = entry
    return entry


def unregister_section(name: str) -> None:
    """Take a section off the page (and its analysis off the runs' analyses)."""
    entry = _SECTIONS.pop(name, None)
    if entry is not None and entry.analyse is not None:
        unregister_section_analysis(name)


def registered_sections() -> list[ReportSection]:
    """Every section, in page order (by place, then order)."""
    return sorted(_SECTIONS.values(), key=lambda e: (PLACES.index(e.place), e.order))


def template_name(entry: ReportSection) -> str:
    """The name the page includes: the file's name in `report_templates/`, or
    `section:<name>` for a template elsewhere (found by `template_loader`)."""
    return f"section:{entry.name}" if isinstance(entry.template, Path) else entry.template


def _load_section_template(name: str) -> tuple[str, str, Callable[[], bool]] | None:
    entry = _SECTIONS.get(name.removeprefix("section:")) if name.startswith("section:") else None
    if entry is None or not isinstance(entry.template, Path):
        return None
    path = entry.template
    mtime = path.stat().st_mtime_ns

    def uptodate() -> bool:
        now = _SECTIONS.get(entry.name)
        return (now is not None and now.template == path and path.exists()
                and path.stat().st_mtime_ns == mtime)

    return path.read_text(encoding="utf-8"), str(path), uptodate


def template_loader() -> jinja2.BaseLoader:
    """Finds the templates of sections registered with a path."""
    return jinja2.FunctionLoader(_load_section_template)


# --- the built-in sections -----------------------------------------------------------
def _policy(summary: Any, _: RunAnalysis, charts: list[Chart]) -> dict[str, Any] | None:
    """Left out when every logical request was one attempt (no retry, no fallback: it
    would only say so at length)."""
    if summary is not None and summary.attempts == summary.logical_requests:
        return None
    context, policy_charts = policy_section(summary)
    charts.extend(policy_charts)
    return context


register_section(ReportSection(
    name="budget", place="headline", order=10, template="_time_budget.html.j2",
    present=lambda budget, _, __: budget_section(budget)))
register_section(ReportSection(
    name="saturation", place="headline", order=5, template="_saturation.html.j2",
    present=lambda figures, _, __: saturation_section(figures)))
register_section(ReportSection(
    name="pd_split", place="headline", order=11, template="_pd_split.html.j2",
    present=lambda split, _, __: pd_split_section(split)))
register_section(ReportSection(
    name="adapters", place="body", order=10, template="_adapters.html.j2",
    present=lambda adapters, _, __: adapter_rows(adapters), anchor="adapters",
    nav="LoRA adapters"))
register_section(ReportSection(
    name="policy", place="body", order=20, template="_policy.html.j2", present=_policy,
    anchor="policy"))
register_section(ReportSection(
    name="token_counts", place="body", order=30, template="_token_counts.html.j2",
    present=lambda counts, _, __: token_count_section(counts or TokenCounts([], [])),
    anchor="token-counts", nav="Token counts"))
register_section(ReportSection(
    name="sessions", place="body", order=40, template="_sessions.html.j2",
    present=lambda _, analysis, charts: session_section(analysis, charts),
    anchor="sessions", nav="Conversations, agents & caches"))
register_section(ReportSection(
    name="spec_decode", place="body", order=45, template="_spec_decode.html.j2",
    present=lambda summary, _, __: spec_decode_section(summary), anchor="spec-decode",
    nav="Speculative decoding"))
register_section(ReportSection(
    name="energy", place="body", order=50, template="_energy.html.j2",
    present=lambda energy, _, __: energy_section(energy), anchor="energy", nav="Energy"))
register_section(ReportSection(
    name="probe", place="body", order=55, template="_probe.html.j2",
    present=lambda figures, _, charts: probe_section(figures, charts), anchor="probe",
    nav="Interference probe"))
register_section(ReportSection(
    name="answers", place="body", order=56, template="_answers.html.j2",
    analyse=lambda run, _: answers_of_run(run.answers, run.manifest),
    present=lambda figures, _, __: answers_section(figures), anchor="answers",
    nav="Answers under load"))
register_section(ReportSection(
    name="microbench", place="closing", order=10, template="_microbench.html.j2",
    present=lambda summary, _, charts: microbench_section(summary, charts),
    anchor="microbench", nav="Microbenchmarks"))
