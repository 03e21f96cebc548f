"""The entry points the CLI and the main job call: results folder(s) in, one
self-contained HTML file out. Each is load → analyse → present → render, each step
once: `write_report` starts from an analysis a caller already made (`zerohop run`)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from zerohop.analysis.comparison.compare import CompareSettings, Comparison, compare_values
from zerohop.analysis.comparison.compared_values import ComparedValues
from zerohop.analysis.run_analysis import AnalysisSettings, RunAnalysis, analyse_run
from zerohop.analysis.run_data import ReportInputError
from zerohop.analysis.server.alerts import AlertRule, load_rules
from zerohop.core.layout import REPORT_FILE
from zerohop.report.present import report_page
from zerohop.report.present_compare import comparison_page
from zerohop.report.render import render_page, write_atomically
from zerohop.storage.run_reader import load_run

AlertRuleInput = str | Mapping[str, Any] | AlertRule


def build_report(
    run_dir: Path,
    out: Path | None = None,
    *,
    window_s: float = 2.0,
    alert_rules: Iterable[AlertRuleInput] | None = None,
    max_lag_windows: int = 5,
    timings: dict[str, float] | None = None,
    summary: bool = False,
) -> Path:
    """Write the report of one results folder (default `<run_dir>/report.html`) and
    return its path: the folder is loaded and analysed once, then `write_report`.
    `summary`: also (re)write the folder's summary.json from the same analysis, as
    `zerohop run` does (`zerohop report DIR` of a folder Locust wrote alone has none).
    `alert_rules=None` applies the default rules; `[]` applies none. `timings`, when
    given, gets the seconds of each step (load, analyse, present, render)."""
    if not window_s > 0:
        raise ReportInputError(f"window must be > 0 s, got {window_s}")
    if max_lag_windows < 0:
        raise ReportInputError(f"max lag must be ≥ 0 windows, got {max_lag_windows}")
    rules = None if alert_rules is None else tuple(load_rules(alert_rules))
    steps = timings if timings is not None else {}
    clock = time.perf_counter()
    run = load_run(Path(run_dir))
    steps["load"], clock = time.perf_counter() - clock, time.perf_counter()
    analysis = analyse_run(
        run,
        AnalysisSettings(window_s=window_s, max_lag_windows=max_lag_windows, alert_rules=rules),
    )
    if summary:
        from zerohop.analysis.summary_document import parts_of_analysis
        from zerohop.storage.summary_file import write_summary

        write_summary(Path(run_dir), run, parts_of_analysis(analysis, run))
    del run  # the records and their gaps: gigabytes at ten million records
    steps["analyse"] = time.perf_counter() - clock
    target = Path(out) if out is not None else Path(run_dir) / REPORT_FILE
    return write_report(analysis, target, timings=steps)


def write_report(analysis: RunAnalysis, out: Path, *,
                 timings: dict[str, float] | None = None) -> Path:
    """Write the report of an analysis already made to `out` and return its path:
    `zerohop run` hands over the analysis its console summary and summary.json came
    from, so the folder is neither read nor analysed a second time (the page and the
    terminal share one analysis). `timings` gets the present and render seconds."""
    steps = timings if timings is not None else {}
    clock = time.perf_counter()
    page = report_page(analysis, generated_at=_now())
    steps["present"], clock = time.perf_counter() - clock, time.perf_counter()
    written = write_atomically(Path(out), render_page("report.html.j2", page.context,
                                                      page.charts))
    steps["render"] = time.perf_counter() - clock
    return written


def build_comparison(
    run_dirs: Sequence[Path],
    out: Path,
    *,
    layer_of: Path | None = None,
    threshold: str = "default",
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Path:
    """Compare every run after the first against the first and write one page.

    `layer_of`: the run that is the direct path; every other run is treated as that
    workload through an extra layer (a latency budget is added). Without it, a layer
    budget appears when the manifests say so (baseline direct, candidate `layer`).
    """
    comparisons = compare_dirs(
        run_dirs,
        layer_of=layer_of,
        threshold=threshold,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    return write_comparison(comparisons, Path(out))


def write_comparison(comparisons: Sequence[Comparison], out: Path, *,
                     layers: Mapping[str, Any] | None = None) -> Path:
    """Render already computed comparisons to `out`; `layers`, an interleaved layer
    comparison's summary (`compare-<run>-arms.json`), adds the "Layers" section."""
    page = comparison_page(comparisons, generated_at=_now(), layers=layers)
    return write_atomically(Path(out), render_page("compare.html.j2", page.context, page.charts))


def compare_dirs(
    run_dirs: Sequence[Path],
    *,
    layer_of: Path | None = None,
    threshold: str = "default",
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[Comparison]:
    """The comparisons behind `build_comparison`, for callers that want verdicts."""
    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < 2:
        raise ReportInputError("compare needs at least two results folders")
    if layer_of is not None:
        direct = Path(layer_of)
        matches = [d for d in dirs if d.resolve() == direct.resolve()]
        if not matches:
            raise ReportInputError(f"--layer-of {direct} is not one of the compared folders")
        dirs = [matches[0], *[d for d in dirs if d.resolve() != direct.resolve()]]
    if threshold not in ("strict", "default", "lenient"):
        raise ReportInputError(
            f"threshold {threshold!r} unknown; choose one of strict, default, lenient"
        )
    if n_boot < 100:
        raise ReportInputError(f"bootstrap draws must be ≥ 100, got {n_boot}")
    if not 0.5 <= confidence < 1.0:
        raise ReportInputError(f"confidence must be in [0.5, 1), got {confidence}")
    settings = CompareSettings(threshold=threshold, n_boot=n_boot, seed=seed, confidence=confidence)
    # one run at a time, its gaps read exact and let go once its samples are fetched
    runs = [ComparedValues(load_run(folder, exact_itl=True)) for folder in dirs]
    layer = True if layer_of is not None else None
    return [compare_values(runs[0], other, settings, layer=layer) for other in runs[1:]]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
